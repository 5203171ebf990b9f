package sftp_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/sftp"
)

// The malformed-DoPut corpus, in-process and over Flight (docs/sinks.md),
// on OpenSSH's sftp-server.
func TestSFTPMalformedDoPut(t *testing.T) {
	root := t.TempDir()
	doputtest.Run(t, func(tb testing.TB) flightsink.Sink {
		c, _ := serve(tb.(*testing.T))
		b, err := sftp.NewOn(c, root, nil)
		require.NoError(tb, err)
		s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "sftp sink"})
		require.NoError(tb, err)
		return s
	})
}
