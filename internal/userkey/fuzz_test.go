package userkey

import (
	"testing"
)

// FuzzImport: Import never panics, and whatever it accepts is a valid key
// that exports and imports again to the same key.
func FuzzImport(f *testing.F) {
	k, err := New("alice")
	if err != nil {
		f.Fatal(err)
	}
	plain, err := Export(k, nil)
	if err != nil {
		f.Fatal(err)
	}
	_, enc := encrypted1(f) // shared with the tests: scrypt is slow under -race
	f.Add(plain, []byte(nil))
	f.Add(enc, []byte(testPass))
	f.Add(enc, []byte(nil))
	f.Add([]byte(`{"format":"cshare-person-v1","id":"x","name":"a","key":"AAAA"}`), []byte(nil))
	f.Add([]byte(`{"format":"cshare-person-v1","encrypted":{"n":32768}}`), []byte("pw"))
	f.Add([]byte("{}"), []byte(nil))
	f.Fuzz(func(t *testing.T, b, pass []byte) {
		got, err := Import(b, pass)
		if err != nil {
			return
		}
		if err := got.check(); err != nil {
			t.Fatalf("Import accepted an invalid key: %v", err)
		}
		again, err := Export(got, nil)
		if err != nil {
			t.Fatalf("re-export: %v", err)
		}
		k2, err := Import(again, nil)
		if err != nil {
			t.Fatalf("import of the re-export: %v", err)
		}
		if k2.ID != got.ID || k2.Name != got.Name || !k2.Priv.Equals(got.Priv) {
			t.Fatalf("re-export changed the key: %s %q vs %s %q", k2.ID, k2.Name, got.ID, got.Name)
		}
	})
}

// FuzzUnmarshal: Unmarshal (user.key) never panics, and whatever it
// accepts marshals and unmarshals again to the same key.
func FuzzUnmarshal(f *testing.F) {
	k, err := New("alice")
	if err != nil {
		f.Fatal(err)
	}
	b, err := k.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"id":"x","name":"a","key":"AAAA"}`))
	f.Add([]byte("{}"))
	f.Add([]byte("null"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Unmarshal(b)
		if err != nil {
			return
		}
		if err := got.check(); err != nil {
			t.Fatalf("Unmarshal accepted an invalid key: %v", err)
		}
		again, err := got.Marshal()
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		k2, err := Unmarshal(again)
		if err != nil {
			t.Fatalf("unmarshal of the re-marshal: %v", err)
		}
		if k2.ID != got.ID || k2.Name != got.Name || !k2.Priv.Equals(got.Priv) {
			t.Fatalf("re-marshal changed the key")
		}
	})
}
