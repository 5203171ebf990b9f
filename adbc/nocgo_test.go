//go:build !cgo

package adbc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/flightline/flightline/adbc"
)

// TestNoCgoSaysSo: without cgo a C driver is refused with ErrNeedsCgo,
// whose message says what to do.
func TestNoCgoSaysSo(t *testing.T) {
	_, err := adbc.Open(context.Background(), adbc.Config{Driver: "/usr/lib/libadbc_driver_postgresql.so"})
	if !errors.Is(err, adbc.ErrNeedsCgo) {
		t.Fatalf("want ErrNeedsCgo, got %v", err)
	}
}
