package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestAPIReferenceListsEveryField: the generated page of each API version
// (make api-docs) has a section for every struct type of the version's
// package that is not only embedded inline, and a row for every JSON field
// of it, an inline embedded type's fields included; so the reference lists
// every field of both versions, and a type changed without `make api-docs`
// fails here as well as in make verify-generated.
func TestAPIReferenceListsEveryField(t *testing.T) {
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		t.Run(version, func(t *testing.T) {
			structs, inlined := apiStructs(t, filepath.Join("..", "apis", "cache", version))
			raw, err := os.ReadFile(filepath.Join("reference", version+".md"))
			if err != nil {
				t.Fatalf("%v (run make api-docs)", err)
			}
			sections := map[string]string{}
			for _, s := range strings.Split(string(raw), "\n### ")[1:] {
				name, body, _ := strings.Cut(s, "\n")
				sections[strings.TrimSpace(name)] = body
			}
			fields := 0
			for name := range structs {
				if inlined[name] {
					continue
				}
				body, ok := sections[name]
				if !ok {
					t.Errorf("reference/%s.md has no section for %s", version, name)
					continue
				}
				for _, f := range jsonFields(structs, name) {
					fields++
					if !strings.Contains(body, "\n| `"+f+"` ") {
						t.Errorf("reference/%s.md, %s: no row for field %s", version, name, f)
					}
				}
			}
			if fields < 10 {
				t.Fatalf("found only %d fields in apis/cache/%s", fields, version)
			}
		})
	}
}

// apiStructs returns the struct types of the Go package in dir (tests
// aside), and which of them some struct embeds inline.
func apiStructs(t *testing.T, dir string) (map[string]*ast.StructType, map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	structs := map[string]*ast.StructType{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				if ts, ok := n.(*ast.TypeSpec); ok {
					if st, ok := ts.Type.(*ast.StructType); ok && ts.Name.IsExported() {
						structs[ts.Name.Name] = st
					}
				}
				return true
			})
		}
	}
	inlined := map[string]bool{}
	for _, st := range structs {
		for _, f := range st.Fields.List {
			if id, ok := f.Type.(*ast.Ident); ok && len(f.Names) == 0 {
				inlined[id.Name] = true
			}
		}
	}
	return structs, inlined
}

// jsonFields returns the JSON names of the fields of structs[name], with
// the fields of the package's types it embeds inline; an embedded type of
// another package (metav1.TypeMeta) adds none, the page printing
// apiVersion and kind itself.
func jsonFields(structs map[string]*ast.StructType, name string) []string {
	var out []string
	for _, f := range structs[name].Fields.List {
		tag := ""
		if f.Tag != nil {
			s, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				continue
			}
			tag = reflect.StructTag(s).Get("json")
		}
		jsonName, _, _ := strings.Cut(tag, ",")
		switch {
		case jsonName == "-":
		case len(f.Names) == 0 && jsonName == "":
			if id, ok := f.Type.(*ast.Ident); ok {
				out = append(out, jsonFields(structs, id.Name)...)
			}
		case jsonName != "":
			out = append(out, jsonName)
		}
	}
	return out
}
