package node

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShape holds node/ to the shape of docs/design.md §3.1 (issue 28): the
// node is the wiring of services that each own their state, so no type
// declares more than maxMethods methods (test files' included) but the
// API's typed client, the root package has at most maxRootLines lines of
// non-test code, and no non-test file has more than maxFileLines.
func TestShape(t *testing.T) {
	const maxMethods, maxRootLines, maxFileLines = 40, 3000, 500
	methods := map[string]int{} // "node/api.Client" -> methods declared
	rootLines := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir, pkg := filepath.Dir(path), "node"
		if dir != "." {
			pkg += "/" + filepath.ToSlash(dir)
		}
		if !strings.HasSuffix(path, "_test.go") {
			lines := bytes.Count(src, []byte("\n"))
			if lines > maxFileLines {
				t.Errorf("%s: %d lines, more than %d: split it where its parts meet", path, lines, maxFileLines)
			}
			if dir == "." {
				rootLines += lines
			}
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 {
				methods[pkg+"."+recvType(fn.Recv.List[0].Type)]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rootLines > maxRootLines {
		t.Errorf("package node: %d lines of non-test code, more than %d: the wiring grew a service", rootLines, maxRootLines)
	}
	if methods["node/api.Client"] == 0 || methods["node.Node"] == 0 {
		t.Fatalf("counted no methods of api.Client or Node: %v", methods)
	}
	for typ, k := range methods {
		if k > maxMethods && typ != "node/api.Client" {
			t.Errorf("%s declares %d methods, more than %d: give part of it a type or a service of its own", typ, k, maxMethods)
		}
	}
}

// recvType is the name of a receiver's type: T of T, *T, T[P] or *T[P].
func recvType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}
