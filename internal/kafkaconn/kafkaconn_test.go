package kafkaconn

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Opts carries every field of the Config and the shared retry policy into
// the kgo client.
func TestOpts(t *testing.T) {
	dialed := false
	c := Config{Brokers: []string{"127.0.0.1:1"}, ClientID: "me", SASL: SASLPlain("u", "p"), SASLName: "PLAIN",
		Dial: func(ctx context.Context, network, host string) (net.Conn, error) {
			dialed = true
			return nil, net.ErrClosed
		}}
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
