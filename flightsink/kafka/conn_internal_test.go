package kafka

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/internal/kafkaconn"
)

// The sink connects as internal/kafkaconn says, like the source: same
// retry policy and its client id.
func TestSinkSharesConnectionConfig(t *testing.T) {
	s, err := New(context.Background(), Config{Brokers: []string{"127.0.0.1:1"}, ClientID: "snk"})
	require.NoError(t, err)
	defer s.Close()
	require.EqualValues(t, kafkaconn.RequestRetries, s.cl.OptValue(kgo.RequestRetries))
	require.Equal(t, kafkaconn.RetryTimeout, s.cl.OptValue(kgo.RetryTimeout))
	require.Equal(t, "snk", s.cl.OptValue(kgo.ClientID))
}
