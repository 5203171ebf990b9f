//go:build cgo

package adbc

import (
	adbcapi "github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-adbc/go/adbc/drivermgr"
)

// cgoBuild reports whether the ADBC driver manager is linked in.
const cgoBuild = true

// driverManager returns the cgo ADBC driver manager, which loads C drivers.
func driverManager() (adbcapi.Driver, error) { return drivermgr.Driver{}, nil }
