package config

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/config.md is what `flightline config doc` prints; regenerate it
// with `go run ./cmd/flightline config doc > docs/config.md`.
func TestConfigDocIsCurrent(t *testing.T) {
	b, err := os.ReadFile("../docs/config.md")
	require.NoError(t, err)
	if want := Reference(); want != string(b) {
		// Name the first line that differs rather than dumping both files.
		wl, gl := strings.Split(want, "\n"), strings.Split(string(b), "\n")
		i := 0
		for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
			i++
		}
		line := func(ls []string) string {
			if i < len(ls) {
				return ls[i]
			}
			return "(end of file)"
		}
		t.Fatalf("docs/config.md is stale at line %d: go run ./cmd/flightline config doc > docs/config.md\nwant: %s\nhave: %s", i+1, line(wl), line(gl))
	}
	for _, sec := range []string{secSources, secSinks} {
		for _, k := range mainKinds(sec) {
			require.Contains(t, string(b), "### `"+k+"`", "every kind is documented")
		}
	}
}
