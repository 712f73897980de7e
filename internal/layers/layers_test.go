package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// pkg is what `go list -json` says of a package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// edge is one import of package to by package from, where each is in a
// different top-level folder of the module.
type edge struct {
	from, to string
	test     bool // by the package's tests only
}

func (e edge) String() string {
	if e.test {
		return e.from + " -> " + e.to + " (tests)"
	}
	return e.from + " -> " + e.to
}

// TestLayersPointOneWay fails when two top-level folders of the module import
// each other both ways (counting the imports of tests, and of the e2e and
// chaos tagged files), naming the folders and the imports that run each way;
// and when the folders import each other round a longer cycle.
func TestLayersPointOneWay(t *testing.T) {
	mod, pkgs := listModule(t)
	if len(pkgs) < 2 {
		t.Fatalf("go list found %d packages in %s", len(pkgs), mod)
	}
	// folder of an import path of the module, "" for one outside it or at
	// its root.
	folder := func(path string) string {
		rest, ok := strings.CutPrefix(path, mod+"/")
		if !ok {
			return ""
		}
		f, _, _ := strings.Cut(rest, "/")
		return f
	}
	short := func(path string) string { return strings.TrimPrefix(path, mod+"/") }

	// between[a][b] lists the imports from folder a into folder b.
	between := map[string]map[string][]edge{}
	for _, p := range pkgs {
		from := folder(p.ImportPath)
		if from == "" {
			continue
		}
		seen := map[string]bool{}
		add := func(imports []string, test bool) {
			for _, imp := range imports {
				to := folder(imp)
				if to == "" || to == from || seen[imp] {
					continue
				}
				seen[imp] = true
				if between[from] == nil {
					between[from] = map[string][]edge{}
				}
				between[from][to] = append(between[from][to], edge{short(p.ImportPath), short(imp), test})
			}
		}
		add(p.Imports, false)
		add(p.TestImports, true)
		add(p.XTestImports, true)
	}

	two := false
	for _, a := range sortedKeys(between) {
		for _, b := range sortedKeys(between[a]) {
			if a >= b || len(between[b][a]) == 0 {
				continue
			}
			two = true
			t.Errorf("folders %s/ and %s/ import each other both ways:\n%s\n%s\n"+
				"move the type or interface to the side that owns it so the imports run one way",
				a, b, list(between[a][b]), list(between[b][a]))
		}
	}
	if two {
		return
	}
	if c := cycle(between); c != nil {
		var b strings.Builder
		for i := 0; i+1 < len(c); i++ {
			b.WriteString(list(between[c[i]][c[i+1]]))
			b.WriteString("\n")
		}
		t.Errorf("folders import each other round a cycle %s/:\n%s", strings.Join(c, "/ -> "), b.String())
	}
}

// listModule lists every package of the module the test runs in, with the
// build tags of the e2e and chaos suites so their files count too.
func listModule(t *testing.T) (string, []pkg) {
	t.Helper()
	out, err := goCmd("list", "-m")
	if err != nil {
		t.Fatal(err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || strings.Contains(mod, "\n") {
		t.Fatalf("go list -m: %q is not one module", mod)
	}
	out, err = goCmd("list", "-e", "-tags", "e2e chaos",
		"-json=ImportPath,Imports,TestImports,XTestImports", mod+"/...")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return mod, pkgs
}

func goCmd(args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// cycle is a cycle of folders (its first folder repeated at its end), or
// nil when the folders' imports form none.
func cycle(between map[string]map[string][]edge) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var found []string
	var visit func(a string) bool
	visit = func(a string) bool {
		state[a] = open
		stack = append(stack, a)
		for _, b := range sortedKeys(between[a]) {
			switch state[b] {
			case open:
				for i, s := range stack {
					if s == b {
						found = append(append([]string{}, stack[i:]...), b)
					}
				}
				return true
			case unseen:
				if visit(b) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[a] = done
		return false
	}
	for _, a := range sortedKeys(between) {
		if state[a] == unseen && visit(a) {
			return found
		}
	}
	return nil
}

func list(es []edge) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = "\t" + e.String()
	}
	sort.Strings(s)
	return strings.Join(s, "\n")
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestCycle(t *testing.T) {
	g := func(pairs ...string) map[string]map[string][]edge {
		m := map[string]map[string][]edge{}
		for _, p := range pairs {
			a, b, _ := strings.Cut(p, ">")
			if m[a] == nil {
				m[a] = map[string][]edge{}
			}
			m[a][b] = append(m[a][b], edge{from: a, to: b})
		}
		return m
	}
	if c := cycle(g("node>p2p", "p2p>ledger", "node>ledger", "ledger>internal")); c != nil {
		t.Errorf("layers: cycle %v", c)
	}
	c := cycle(g("cmd>node", "node>p2p", "p2p>ledger", "ledger>node"))
	if got := strings.Join(c, ">"); got != "node>p2p>ledger>node" {
		t.Errorf("cycle = %q, want node>p2p>ledger>node", got)
	}
}
