package logs

import (
	"bytes"
	"errors"
	"testing"
)

func TestSaveReadOpen(t *testing.T) {
	s := New(t.TempDir(), 8)
	if _, err := s.Read("job1", 3); !errors.Is(err, ErrNoLog) {
		t.Fatalf("read before save: %v, want ErrNoLog", err)
	}
	if err := s.Save("job1", 3, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Read("job1", 3); err != nil || string(b) != "hello" {
		t.Fatalf("read = %q, %v", b, err)
	}
	// Replaced, and capped to the last 8 bytes.
	if err := s.Save("job1", 3, []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	r, size, err := s.Open("job1", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	if size != 8 || buf.String() != "23456789" {
		t.Fatalf("open = %q (size %d), want the last 8 bytes", buf.String(), size)
	}
}

func TestJobIDsStayInside(t *testing.T) {
	s := New(t.TempDir(), 0)
	for _, job := range []string{"", ".", "..", emptyFile, "../x", "a/b", `a\b`, "a\x00b"} {
		if err := s.Save(job, 1, []byte("x")); err == nil {
			t.Errorf("Save(%q) accepted", job)
		}
		if _, err := s.Read(job, 1); err == nil || errors.Is(err, ErrNoLog) {
			t.Errorf("Read(%q) = %v, want an invalid-ID error", job, err)
		}
	}
}

// TestEmptyOutputs: empty outputs share one file (a link each), and
// replacing one, with output or without, leaves the others empty.
func TestEmptyOutputs(t *testing.T) {
	s := New(t.TempDir(), 0)
	for item := int64(1); item <= 3; item++ {
		if err := s.Save("job1", item, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save("job1", 2, []byte("out")); err != nil {
		t.Fatal(err)
	}
	if err := s.Save("job1", 3, []byte{}); err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{1: "", 2: "out", 3: ""}
	for item, w := range want {
		if b, err := s.Read("job1", item); err != nil || string(b) != w {
			t.Errorf("item %d = %q, %v; want %q", item, b, err, w)
		}
	}
	if err := s.Save("job1", 2, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Read("job1", 2); err != nil || len(b) != 0 {
		t.Errorf("item 2 after an empty save = %q, %v; want empty", b, err)
	}
}
