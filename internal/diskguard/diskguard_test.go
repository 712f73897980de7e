package diskguard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"
)

// fakeFS is a filesystem of size bytes of which other are taken by others;
// the ballast file (real, in a temporary directory) takes what it has on
// disk.
type fakeFS struct {
	size  int64
	other atomic.Int64
	dir   string
	fail  atomic.Bool
}

func (f *fakeFS) stat(dir string) (int64, error) {
	if dir != f.dir {
		return 0, fmt.Errorf("stat of %s, want %s", dir, f.dir)
	}
	if f.fail.Load() {
		return 0, errors.New("statfs: input/output error")
	}
	held, err := onDisk(filepath.Join(f.dir, BallastName))
	if err != nil {
		return 0, err
	}
	return f.size - f.other.Load() - held, nil
}

// leave sets others' use so that free bytes are left, the ballast counted
// as used.
func (f *fakeFS) leave(free, ballast int64) { f.other.Store(f.size - ballast - free) }

func newFake(t *testing.T, size int64) *fakeFS {
	return &fakeFS{size: size, dir: t.TempDir()}
}

// openGuard opens a guard of fs whose reserve and ballast are mib MiB.
func openGuard(t *testing.T, fs *fakeFS, mib int64) *Guard {
	t.Helper()
	g, err := Open(fs.dir, Options{Reserve: mib * MiB, Ballast: mib * MiB, Stat: fs.stat})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func ballastOnDisk(t interface {
	Helper()
	Fatal(...any)
}, dir string) int64 {
	t.Helper()
	n, err := onDisk(filepath.Join(dir, BallastName))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGuardRefusesBelowTheReserveAndResumes(t *testing.T) {
	fs := newFake(t, 64*MiB)
	var changes atomic.Int32
	g, err := Open(fs.dir, Options{Reserve: 4 * MiB, Ballast: 4 * MiB, Stat: fs.stat, OnChange: func() { changes.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if g.Full() || g.Check(0) != nil {
		t.Fatalf("a guard with 60 MiB free is full (%v) or refuses (%v)", g.Full(), g.Check(0))
	}
	if n := ballastOnDisk(t, fs.dir); n < 4*MiB {
		t.Fatalf("ballast has %d bytes on disk, want 4 MiB", n)
	}

	// Another file takes all but 3 MiB.
	fs.leave(3*MiB, 4*MiB)
	err = g.Check(1024)
	want := fmt.Sprintf("disk full: 3 MiB free in %s, cshare keeps 4 MiB", fs.dir)
	if err == nil || err.Error() != want || !errors.Is(err, ErrFull) {
		t.Fatalf("check below the reserve: %v, want %q (errors.Is ErrFull)", err, want)
	}
	if !g.Full() || changes.Load() != 1 {
		t.Fatalf("full %v after %d changes; want full after 1", g.Full(), changes.Load())
	}
	if n := ballastOnDisk(t, fs.dir); n != 0 {
		t.Fatalf("full, and the ballast still holds %d bytes", n)
	}
	// The released ballast is still owed: 3 MiB free, not 7.
	if err := g.Check(0); err == nil || err.Error() != want {
		t.Fatalf("second check: %v, want %q", err, want)
	}

	// Back to the reserve exactly: below the margin, still full.
	fs.leave(4*MiB, 4*MiB)
	g.Poll()
	if !g.Full() || g.Check(0) == nil {
		t.Fatal("resumed at the reserve exactly, within the margin")
	}
	// Room again: the ballast comes back first, then the guard resumes.
	fs.leave(6*MiB, 4*MiB)
	if err := g.Check(0); err == nil {
		t.Fatal("a check resumed a full guard; only Poll may")
	}
	g.Poll()
	if g.Full() || g.Check(0) != nil || changes.Load() != 2 {
		t.Fatalf("after room came back: full %v, check %v, %d changes (want 2)", g.Full(), g.Check(0), changes.Load())
	}
	if n := ballastOnDisk(t, fs.dir); n < 4*MiB {
		t.Fatalf("resumed with a ballast of %d bytes", n)
	}
}

func TestGuardRefusesAWriteThatWouldEatTheReserve(t *testing.T) {
	fs := newFake(t, 64*MiB)
	g := openGuard(t, fs, 4)
	fs.leave(10*MiB, 4*MiB)
	if err := g.Check(7 * MiB); !errors.Is(err, ErrFull) {
		t.Fatalf("a 7 MiB write with 10 MiB free and 4 kept: %v", err)
	}
	if g.Full() {
		t.Fatal("one large write refused turned the guard full")
	}
	if err := g.Check(6 * MiB); err != nil {
		t.Fatalf("a 6 MiB write with 10 MiB free and 4 kept: %v", err)
	}
}

func TestGuardStartsFullWithoutRoomForItsBallast(t *testing.T) {
	fs := newFake(t, 64*MiB)
	fs.leave(2*MiB, 4*MiB) // no ballast yet: 6 MiB really free
	g := openGuard(t, fs, 4)
	if !g.Full() || ballastOnDisk(t, fs.dir) != 0 {
		t.Fatalf("full %v, ballast %d bytes; want full without a ballast", g.Full(), ballastOnDisk(t, fs.dir))
	}
	fs.leave(20*MiB, 4*MiB)
	g.Poll()
	if g.Full() || ballastOnDisk(t, fs.dir) < 4*MiB {
		t.Fatalf("with room: full %v, ballast %d bytes", g.Full(), ballastOnDisk(t, fs.dir))
	}
}

func TestGuardRemakesARemovedBallastAndShrinksALargeOne(t *testing.T) {
	fs := newFake(t, 64*MiB)
	if err := fill(filepath.Join(fs.dir, BallastName), 6*MiB); err != nil {
		t.Fatal(err)
	}
	g := openGuard(t, fs, 2)
	if n := ballastOnDisk(t, fs.dir); n < 2*MiB || n > 3*MiB {
		t.Fatalf("a 6 MiB ballast kept for a 2 MiB reserve: %d bytes", n)
	}
	if err := os.Remove(filepath.Join(fs.dir, BallastName)); err != nil {
		t.Fatal(err)
	}
	g.Poll()
	if n := ballastOnDisk(t, fs.dir); n < 2*MiB {
		t.Fatalf("a removed ballast not made again: %d bytes", n)
	}
}

func TestGuardStaysFullWhileItsBallastCannotBeMade(t *testing.T) {
	fs := newFake(t, 64*MiB)
	g := openGuard(t, fs, 2)
	fs.leave(0, 2*MiB)
	if g.Check(0) == nil {
		t.Fatal("no refusal with nothing free")
	}
	// Something now stands where the ballast goes.
	block := filepath.Join(fs.dir, BallastName)
	if err := os.MkdirAll(filepath.Join(block, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	fs.leave(30*MiB, 2*MiB)
	g.Poll()
	if !g.Full() {
		t.Fatal("resumed without its ballast")
	}
	if err := os.RemoveAll(block); err != nil {
		t.Fatal(err)
	}
	g.Poll()
	if g.Full() {
		t.Fatal("still full once the ballast could be made")
	}
}

func TestGuardOff(t *testing.T) {
	fs := newFake(t, 64*MiB)
	if err := fill(filepath.Join(fs.dir, BallastName), MiB); err != nil {
		t.Fatal(err)
	}
	fs.leave(0, 0)
	g, err := Open(fs.dir, Options{Stat: fs.stat})
	if err != nil {
		t.Fatal(err)
	}
	g.Poll()
	if g.Full() || g.Check(MiB) != nil || ballastOnDisk(t, fs.dir) != 0 {
		t.Fatalf("reserve 0: full %v, check %v, ballast %d bytes; want off and no ballast", g.Full(), g.Check(MiB), ballastOnDisk(t, fs.dir))
	}
	var nilGuard *Guard
	nilGuard.Poll()
	if nilGuard.Full() || nilGuard.Check(1) != nil {
		t.Fatal("a nil guard refuses")
	}
	if _, err := Open(fs.dir, Options{Reserve: -1}); err == nil {
		t.Fatal("a negative reserve was taken")
	}
}

func TestGuardRefusesNothingWhenSpaceIsUnknown(t *testing.T) {
	fs := newFake(t, 64*MiB)
	g := openGuard(t, fs, 2)
	fs.leave(0, 2*MiB)
	fs.fail.Store(true)
	g.Poll()
	if g.Full() || g.Check(0) != nil {
		t.Fatal("an unreadable free space refused a write")
	}
}

// TestGuardProperty: over any sequence of others' use, checks and polls,
// run from several goroutines, a check that passes saw the reserve and the
// write's size free; a full guard holds no ballast; a guard that polled
// with room to spare is not full and holds its whole ballast.
func TestGuardProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		reserve := rapid.Int64Range(1, 4).Draw(rt, "reserveMiB") * MiB
		ballast := rapid.Int64Range(0, 4).Draw(rt, "ballastMiB") * MiB
		fs := &fakeFS{size: 64 * MiB, dir: t.TempDir()}
		g, err := Open(fs.dir, Options{Reserve: reserve, Ballast: ballast, Stat: fs.stat})
		if err != nil {
			rt.Fatal(err)
		}
		margin := max(reserve/8, MiB)
		steps := rapid.SliceOfN(rapid.Int64Range(0, 24), 1, 30).Draw(rt, "freeMiB")
		for i, free := range steps {
			fs.leave(free*MiB, ballast)
			var wg sync.WaitGroup
			var bad atomic.Value
			for k := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					need := int64(k) * MiB / 2
					if g.Check(need) == nil && free*MiB-need < reserve {
						bad.Store(fmt.Sprintf("step %d: a %d byte write passed with %d MiB free", i, need, free))
					}
				}()
			}
			wg.Wait()
			if b := bad.Load(); b != nil {
				rt.Fatal(b)
			}
			if g.Full() && ballastOnDisk(rt, fs.dir) != 0 {
				rt.Fatalf("step %d: full with a ballast on disk", i)
			}
			g.Poll()
			if free*MiB >= reserve+margin && (g.Full() || ballastOnDisk(rt, fs.dir) < ballast) {
				rt.Fatalf("step %d: %d MiB free polled: full %v, ballast %d bytes", i, free, g.Full(), ballastOnDisk(rt, fs.dir))
			}
			if free*MiB < reserve && !g.Full() {
				rt.Fatalf("step %d: %d MiB free and not full", i, free)
			}
		}
	})
}
