// Package integration holds Flightline's end-to-end tests: interop with
// independent clients (pyarrow.flight), kill -9 crash tests of the flightline
// binary, and tests against the real services that
// integration/services/services.sh starts.
//
// Tests that need a service read its address from the environment that
// `make test` exports. Without it they skip with a message, unless
// FLIGHTLINE_REQUIRE_SERVICES=1 (set by `make test`), where a missing
// service fails the test instead of quietly skipping it.
//
// Tests that call t.Parallel (each with its own topic, tables, directories
// and ports, no t.Setenv and no package-level setting) run after every
// sequential test of the package, two at a time (-parallel defaults to
// GOMAXPROCS), so they never run beside a kill test that measures its
// recovery time. Only cheap tests without time bounds of their own are
// marked: a kill test measuring recovery must not share the CPU with them.
package integration

import (
	"testing"

	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// Need returns the value of the environment variable naming a service, or
// skips (fails under FLIGHTLINE_REQUIRE_SERVICES=1) when it is unset.
func Need(t testing.TB, env, what string) string {
	t.Helper()
	return servicetest.Need(t, env, what)
}
