//go:build !cgo

package adbc

import (
	adbcapi "github.com/apache/arrow-adbc/go/adbc"
)

// cgoBuild reports whether the ADBC driver manager is linked in.
const cgoBuild = false

// driverManager fails: the ADBC driver manager is C++ reached through cgo,
// and this binary was built without it.
func driverManager() (adbcapi.Driver, error) { return nil, ErrNeedsCgo }
