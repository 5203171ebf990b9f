package flightline_test

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/flightline/flightline"

// The house, bottom up (docs/design.md draws it). A package may import
// packages of its own layer or of a layer below, never one above. Test
// files are not checked: a connector's tests may run a coordinator.
//
// Test kits (a package whose last path element ends in "test": the public
// conformance suites flightsink/sinktest, flightsrc/srctest and
// transform/transformtest next to their contracts, and every other kit
// under internal/testkit/) and the test rooms (integration/, bench/) may
// import any layer, but no other non-test package may import them.
var layers = []struct {
	name  string
	rooms []string // import paths relative to the module; "x/..." is x and everything under it
}{
	{"vocabulary", []string{"", "checkpoint", "kafkadecode"}},
	{"internals", []string{"internal/..."}},
	{"shared drivers", []string{"adbc/...", "schemasink/..."}},
	{"transforms", []string{"transform/..."}},
	{"connectors", []string{"flightsink/...", "flightsrc/..."}},
	{"coordinator", []string{"coordinator/..."}},
	{"pipelines", []string{"pipelines/..."}},
	{"config", []string{"config/..."}},
	{"commands", []string{"cmd/..."}},
}

// layerOf is the index of rel's layer in layers, or -1 for test kits and
// test rooms, or -2 for a package the list does not place.
func layerOf(rel string) int {
	if isKit(rel) {
		return -1
	}
	for i, l := range layers {
		for _, r := range l.rooms {
			if base, ok := strings.CutSuffix(r, "/..."); ok {
				if rel == base || strings.HasPrefix(rel, base+"/") {
					return i
				}
			} else if rel == r {
				return i
			}
		}
	}
	return -2
}

// isKit says whether rel (relative to the module) is a test kit or a test
// room.
func isKit(rel string) bool {
	last := rel[strings.LastIndex(rel, "/")+1:]
	switch {
	case rel == "internal/testkit" || strings.HasPrefix(rel, "internal/testkit/"):
		return true
	case rel == "integration" || strings.HasPrefix(rel, "integration/"):
		return true
	case rel == "bench" || strings.HasPrefix(rel, "bench/"):
		return true
	case strings.HasSuffix(last, "test") && !strings.HasPrefix(rel, "internal/"):
		return true
	}
	return false
}

// upward says why a non-test file of package pkg may not import imp
// (both relative to the module), or "".
func upward(pkg, imp string) string {
	lp, li := layerOf(pkg), layerOf(imp)
	switch {
	case li == -2:
		return fmt.Sprintf("%q is in no layer: place it in layering_test.go", imp)
	case lp == -2:
		return fmt.Sprintf("%q is in no layer: place it in layering_test.go", pkg)
	case li == -1 && lp != -1:
		return "a production package imports a test kit; kits are for tests only"
	case lp == -1:
		return ""
	case li > lp:
		return fmt.Sprintf("layer %q imports layer %q above it", layers[lp].name, layers[li].name)
	}
	return ""
}

// TestLayering checks every import of every non-test file against the
// layers.
func TestLayering(t *testing.T) {
	out := goList(t, `{{.ImportPath}} {{join .Imports " "}}`)
	checked := 0
	for _, pkg := range slices.Sorted(maps.Keys(out)) {
		imps := out[pkg]
		rel := relative(pkg)
		checked++
		if layerOf(rel) == -2 {
			t.Errorf("%s is in no layer: place it in layering_test.go", pkg)
			continue
		}
		for _, imp := range imps {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if why := upward(rel, relative(imp)); why != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, why)
			}
		}
	}
	if checked < 40 {
		t.Fatalf("checked %d packages; go list output:\n%v", checked, out)
	}
}

func relative(pkg string) string {
	if pkg == module {
		return ""
	}
	return strings.TrimPrefix(pkg, module+"/")
}

// goList runs go list over the module with format, whose output lines are
// a package followed by a list of packages.
func goList(t *testing.T, format string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", format, "./...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		m[fields[0]] = fields[1:]
	}
	return m
}

// The layer rule itself: what TestLayering refuses and allows.
func TestLayeringRule(t *testing.T) {
	for _, c := range []struct {
		pkg, imp string
		bad      bool
	}{
		{"flightsink", "", false},
		{"flightsink", "checkpoint", false},
		{"flightsink/delta", "internal/deltalog", false},
		{"flightsink/databricks", "flightsink/delta", false},
		{"flightsrc/kafka", "transform", false},
		{"flightsink/adbc", "adbc", false},
		{"coordinator", "flightsink", false},
		{"pipelines", "coordinator", false},
		{"cmd/flightline", "pipelines", false},
		{"internal/deltalog", "internal/objstore", false},
		{"internal/sqlcheckpoint", "flightsink", true},
		{"transform/flighttransform", "flightsink", true},
		{"internal/testkit/heaptest", "coordinator", false},
		{"internal/heaptest", "coordinator", true},
		{"flightsink/sinktest", "internal/testkit/flighttest", false},
		{"integration", "cmd/flightline", false},
		{"flightsink/postgres", "internal/testkit/pgtest", true},
		{"internal/pgarrow", "internal/testkit/pgtest", true},
		{"cmd/flightline", "flightsink/sinktest", true},
		{"checkpoint", "internal/metrics", true},
		{"internal/objstore", "adbc", true},
		{"adbc", "flightsink", true},
		{"flightsink", "coordinator", true},
		{"coordinator", "pipelines", true},
		{"pipelines", "cmd/flightline", true},
		{"flightsink", "nowhere", true},
	} {
		if got := upward(c.pkg, c.imp) != ""; got != c.bad {
			t.Errorf("upward(%q, %q) = %v, want %v", c.pkg, c.imp, got, c.bad)
		}
	}
}

// Connectors import only their own side's contract. A package under
// flightsrc/ or flightsink/ (the contracts, their servers and clients, and
// the connectors) never depends on the coordinator or on pipelines, and a
// source package never depends on a sink package nor the other way round,
// directly or through another package; transform/ depends on neither side,
// so both may use it. Pipelines that join both sides live in pipelines/.
// Test files are not checked.
func TestSides(t *testing.T) {
	checked := 0
	all := goList(t, `{{.ImportPath}} {{join .Deps " "}}`)
	for _, pkg := range slices.Sorted(maps.Keys(all)) {
		deps := all[pkg]
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
		t.Fatalf("checked %d packages under flightsrc/, flightsink/ and transform/", checked)
	}
}

// sideOf is "src" for packages under flightsrc/, "sink" under flightsink/,
// "transform" under transform/, and "" elsewhere.
func sideOf(pkg string) string {
	for _, s := range []string{"flightsrc", "flightsink", "transform"} {
		root := module + "/" + s
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
	case sideOf(dep) == "transform":
		return ""
	case side == "transform" && sideOf(dep) != "":
		return "transforms are shared by both sides and import neither"
	case sideOf(dep) != "" && sideOf(dep) != side:
		return "a source does not import the sink side, nor a sink the source side; share code through a lower package (transform, checkpoint, internal/...)"
	}
	return ""
}

// The side rule itself: what TestSides refuses and allows.
func TestSidesRule(t *testing.T) {
	for _, c := range []struct {
		side, dep string
		bad       bool
	}{
		{"flightsrc", module + "/coordinator", true},
		{"flightsink", module + "/coordinator", true},
		{"flightsrc", module + "/pipelines", true},
		{"flightsrc", module + "/flightsink", true},
		{"flightsrc", module + "/flightsink/delta", true},
		{"flightsink", module + "/flightsrc", true},
		{"flightsink", module + "/flightsrc/kafka", true},
		{"transform", module + "/flightsink", true},
		{"transform", module + "/flightsrc", true},
		{"flightsrc", module + "/flightsrc", false},
		{"flightsink", module + "/flightsink/sinktest", false},
		{"flightsrc", module + "/transform", false},
		{"flightsink", module + "/transform/flighttransform", false},
		{"flightsink", module + "/checkpoint", false},
		{"flightsrc", module + "/flightsinkx", false},
	} {
		if got := forbidden(c.side, c.dep) != ""; got != c.bad {
			t.Errorf("forbidden(%s, %s) = %v, want %v", c.side, c.dep, got, c.bad)
		}
	}
}
