package integration

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// make test runs the crash and fault tests short and make chaos runs them
// long (FLIGHTLINE_CHAOS=1): every test of this package that reads
// chaosMode or killCount, directly or through a helper, must be in the
// Makefile's CHAOS_TESTS, or its long run would never happen; and every
// name there must be a test (a renamed test would drop out silently).
func TestChaosTestsListEveryLongVariant(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^CHAOS_TESTS := (.+)$`).FindSubmatch(mk)
	require.NotNil(t, m, "CHAOS_TESTS in the Makefile")
	listed := strings.Split(string(m[1]), "|")

	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	bodies := map[string]*ast.BlockStmt{} // package-level functions
	for _, f := range files {
		if f == "chaoslist_test.go" {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Body != nil {
				bodies[fd.Name.Name] = fd.Body
			}
		}
	}
	// uses: the package's functions each function names.
	uses := map[string][]string{}
	for name, body := range bodies {
		ast.Inspect(body, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Name != name {
				if _, fn := bodies[id.Name]; fn || id.Name == "chaosMode" || id.Name == "killCount" {
					uses[name] = append(uses[name], id.Name)
				}
			}
			return true
		})
	}
	long := map[string]bool{"chaosMode": true, "killCount": true}
	for changed := true; changed; {
		changed = false
		for name, us := range uses {
			if !long[name] && slices.ContainsFunc(us, func(u string) bool { return long[u] }) {
				long[name], changed = true, true
			}
		}
	}
	var missing []string
	for name := range bodies {
		if strings.HasPrefix(name, "Test") && long[name] && !slices.Contains(listed, name) {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "tests with a long variant that make chaos does not run: add them to CHAOS_TESTS")
	for _, name := range listed {
		_, ok := bodies[name]
		require.True(t, ok, "CHAOS_TESTS names %s, which is not a test of this package", name)
	}
}
