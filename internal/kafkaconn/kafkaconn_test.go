package kafkaconn

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline"
)

// Opts carries every field of the Config and the shared retry policy into
// the kgo client.
func TestOpts(t *testing.T) {
	dialed := false
	c := Config{Brokers: []string{"127.0.0.1:1"}, ClientID: "me"}
	c.UseSASLPlain("u", "p")
	c.UseDialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		dialed = true
		return nil, net.ErrClosed
	})
	cl, err := kgo.NewClient(c.Opts(nil)...)
	require.NoError(t, err)
	defer cl.Close()
	require.Equal(t, []string{"127.0.0.1:1"}, cl.OptValue(kgo.SeedBrokers))
	require.Equal(t, "me", cl.OptValue(kgo.ClientID))
	require.EqualValues(t, RequestRetries, cl.OptValue(kgo.RequestRetries))
	require.Equal(t, RetryTimeout, cl.OptValue(kgo.RetryTimeout))
	require.NotNil(t, cl.OptValue(kgo.SASL))
	_ = cl.Ping(context.Background())
	require.True(t, dialed, "the client dials through Config.Dial")
}

// The source's and the sink's SASL and TLS options both land here.
func TestUse(t *testing.T) {
	var c Config
	c.UseSASLPlain("u", "p")
	require.Equal(t, "PLAIN", c.SASLName)
	require.Equal(t, "PLAIN", c.SASL.Name())
	for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		require.NoError(t, c.UseSASLScram(m, "u", "p"))
		require.Equal(t, m, c.SASLName)
		require.Equal(t, m, c.SASL.Name())
	}
	err := c.UseSASLScram("SCRAM-MD5", "u", "p")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Equal(t, "SCRAM-SHA-512", c.SASLName, "a refused mechanism leaves the config as it was")
	cfg := &tls.Config{ServerName: "broker"}
	c.UseTLS(cfg)
	require.Same(t, cfg, c.TLS)
}

// TestUseSASL: the Config's mechanism name, any letter case, picks the
// mechanism; none leaves the connection unauthenticated.
func TestUseSASL(t *testing.T) {
	for m, want := range map[string]string{"": "", "plain": "PLAIN", "scram-sha-256": "SCRAM-SHA-256", "SCRAM-SHA-512": "SCRAM-SHA-512"} {
		var c Config
		require.NoError(t, c.UseSASL(m, "u", "p"), m)
		require.Equal(t, want, c.SASLName, m)
	}
	var c Config
	require.ErrorIs(t, c.UseSASL("gssapi", "u", "p"), flightline.ErrInvalidInput)
}
