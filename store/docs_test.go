package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/lifecycle"
)

// TestAddingAnSLIExample holds the worked example of docs/architecture.md
// ("Adding an SLI") to the code, so that it can be followed as written:
// the SLI value, the skip reason, the field number and the flag bit it
// gives are the next free ones; every file it names exists (but the one
// it says is new); and every non-test file whose code lists all the SLIs,
// or all the observation kinds that feed one, is among them, since a new
// SLI must join each such list.
func TestAddingAnSLIExample(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "architecture.md"))
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, "\n## Adding an SLI\n")
	require.GreaterOrEqual(t, start, 0, "docs/architecture.md has no section \"Adding an SLI\"")
	example := doc[start+1:]
	if end := strings.Index(example, "\n## "); end >= 0 {
		example = example[:end]
	}
	number := func(pattern string) int {
		t.Helper()
		m := regexp.MustCompile(pattern).FindAllStringSubmatch(example, -1)
		require.NotEmpty(t, m, "the example has no %s", pattern)
		n, err := strconv.Atoi(m[0][1])
		require.NoError(t, err)
		for _, other := range m[1:] {
			assert.Equal(t, m[0][1], other[1], "the example gives two values for %s", pattern)
		}
		return n
	}

	var nextSLI, nextReason int
	for _, s := range lifecycle.Skips() {
		nextSLI, nextReason = max(nextSLI, int(s.SLI)+1), max(nextReason, int(s.Reason)+1)
	}
	assert.Equal(t, nextSLI, number(`ContainerCreation SLI = (\d+)`), "the example's SLI value is the next one")
	assert.Equal(t, nextReason, number("`NoImagePulled Reason = (\\d+)`"), "the example's reason is the next one")
	nextField := int(podFields[len(podFields)-1].num) + 1
	assert.Equal(t, nextField, number(`secondsField\((\d+), "container_creation"`), "the example's field number is the next one")
	assert.Equal(t, nextField, number("`pod (\\d+) container_creation`"), "the example's fields.txt line")
	for i, f := range stateFlagBits {
		require.Equal(t, uint64(1)<<i, f.bit, "stateFlagBits are in bit order")
	}
	assert.Equal(t, len(stateFlagBits), number(`\{1 << (\d+), func\(s \*lifecycle\.State\) \*bool \{ return &s\.HasContainerCreation \}\}`),
		"the example's flag bit is the next one")

	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:[a-z]+/)+[a-z_]+\\.(?:go|txt|md))`( \\(new\\))?").FindAllStringSubmatch(example, -1) {
		path, isNew := m[1], m[2] != ""
		named[path] = true
		_, err := os.Stat(filepath.Join("..", path))
		if isNew {
			assert.True(t, os.IsNotExist(err), "the example's new file %s exists already", path)
		} else {
			assert.NoError(t, err, "the example names %s", path)
		}
	}

	slis, kinds := lifecycleEnums(t)
	for _, file := range enumeratingFiles(t, slis, kinds) {
		assert.True(t, named[file], "%s lists every SLI or every kind that feeds one, so a new SLI goes there too: the example must name it", file)
	}
}

// lifecycleEnums are the Go names of lifecycle's SLI values, and of the
// observation kinds that feed an SLI (Kind.SLI), read from its source.
func lifecycleEnums(t *testing.T) (slis, kinds []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "lifecycle", "*.go"))
	require.NoError(t, err)
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST || len(g.Specs) == 0 {
				continue
			}
			first, _ := g.Specs[0].(*ast.ValueSpec)
			typ, _ := first.Type.(*ast.Ident)
			if typ == nil {
				continue
			}
			// Kinds are numbered by iota, in order; SLIs explicitly,
			// each with its type.
			for i, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				name := vs.Names[0].Name
				if !ast.IsExported(name) {
					continue
				}
				switch typ.Name {
				case "SLI":
					slis = append(slis, name)
				case "Kind":
					if _, measured := lifecycle.Kind(i).SLI(); measured {
						kinds = append(kinds, name)
					}
				}
			}
		}
	}
	require.Len(t, slis, len(lifecycle.MeasuredSLIs()), "lifecycle's SLI constants, as read from its source")
	require.Len(t, kinds, len(lifecycle.MeasuredSLIs()), "one kind feeds each SLI")
	return slis, kinds
}

// enumeratingFiles are the repository's non-test Go files whose code names
// every one of slis, or every one of kinds: bare in package lifecycle,
// as lifecycle.X elsewhere.
func enumeratingFiles(t *testing.T, slis, kinds []string) []string {
	t.Helper()
	var out []string
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		names := referencedLifecycleNames(f)
		all := func(want []string) bool {
			return !slices.ContainsFunc(want, func(n string) bool { return !names[n] })
		}
		if all(slis) || all(kinds) {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, out, "no file lists the SLIs: the scan is broken")
	return out
}

// referencedLifecycleNames are the names f uses of package lifecycle's:
// in lifecycle itself, identifiers that are not a field, a selected name
// or a composite literal's key; elsewhere, the X of lifecycle.X.
func referencedLifecycleNames(f *ast.File) map[string]bool {
	names := map[string]bool{}
	if f.Name.Name != "lifecycle" {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "lifecycle" {
					names[sel.Sel.Name] = true
				}
			}
			return true
		})
		return names
	}
	skip := map[*ast.Ident]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			skip[n.Sel] = true
		case *ast.Field:
			for _, id := range n.Names {
				skip[id] = true
			}
		case *ast.KeyValueExpr:
			if id, ok := n.Key.(*ast.Ident); ok {
				skip[id] = true
			}
		case *ast.Ident:
			if !skip[n] {
				names[n.Name] = true
			}
		}
		return true
	})
	return names
}
