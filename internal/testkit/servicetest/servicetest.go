// Package servicetest gates tests on the real services that
// integration/services/services.sh starts.
package servicetest

import (
	"os"
	"testing"
)

// Need returns the value of the environment variable env, which names a
// service (its address, DSN, …). When it is unset the test skips with a
// message saying what is missing — or fails, under
// FLIGHTLINE_REQUIRE_SERVICES=1 (set by `make test`), so a service that did
// not start can never turn its tests into silent skips.
func Need(tb testing.TB, env, what string) string {
	tb.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	msg := what + " not available: " + env + " is unset (run `make test`, which starts the services)"
	if os.Getenv("FLIGHTLINE_REQUIRE_SERVICES") == "1" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}
