package flightline_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/flightline/flightline"

// Connectors import only their own side's contract. A package under
// flightsrc/ or flightsink/ (the contracts, their servers and clients, and
// the connectors) never depends on the coordinator or on pipelines, and a
// source package never depends on a sink package nor the other way round,
// directly or through another package. Pipelines that join both sides
// live in pipelines/. Test files are not checked: a connector's tests may
// run a coordinator.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	checked := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg, deps := fields[0], fields[1:]
		side := sideOf(pkg)
		if side == "" {
			continue
		}
		checked++
		for _, d := range deps {
			if violation := forbidden(side, d); violation != "" {
				t.Errorf("%s depends on %s: %s", pkg, d, violation)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d packages under flightsrc/ and flightsink/; go list output:\n%s", checked, out)
	}
}

// sideOf is "src" for packages under flightsrc/, "sink" under flightsink/,
// and "" elsewhere.
func sideOf(pkg string) string {
	for _, s := range []string{"src", "sink"} {
		root := module + "/flight" + s
		if pkg == root || strings.HasPrefix(pkg, root+"/") {
			return s
		}
	}
	return ""
}

// forbidden says why a package of side may not depend on dep, or "".
func forbidden(side, dep string) string {
	switch {
	case dep == module+"/coordinator":
		return "connectors do not import the coordinator; assemble pipelines in pipelines/"
	case dep == module+"/pipelines" || strings.HasPrefix(dep, module+"/pipelines/"):
		return "connectors do not import pipelines"
	case sideOf(dep) != "" && sideOf(dep) != side:
		return "a source does not import the sink side, nor a sink the source side; share code through a leaf package (transform, checkpoint, internal/...)"
	}
	return ""
}

// The rule itself: what TestLayering refuses and allows.
func TestLayeringRule(t *testing.T) {
	for _, c := range []struct {
		side, dep string
		bad       bool
	}{
		{"src", module + "/coordinator", true},
		{"sink", module + "/coordinator", true},
		{"src", module + "/pipelines", true},
		{"src", module + "/flightsink", true},
		{"src", module + "/flightsink/delta", true},
		{"sink", module + "/flightsrc", true},
		{"sink", module + "/flightsrc/kafka", true},
		{"src", module + "/flightsrc", false},
		{"sink", module + "/flightsink/sinktest", false},
		{"src", module + "/transform", false},
		{"sink", module + "/checkpoint", false},
		{"src", module + "/flightsinkx", false},
	} {
		if got := forbidden(c.side, c.dep) != ""; got != c.bad {
			t.Errorf("forbidden(%s, %s) = %v, want %v", c.side, c.dep, got, c.bad)
		}
	}
}
