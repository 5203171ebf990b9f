package kafka

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/internal/kafkaconn"
)

// The source connects as internal/kafkaconn says, like the sink: same
// retry policy, its client id, its dialer.
func TestSourceSharesConnectionConfig(t *testing.T) {
	s, err := New(context.Background(), Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, ClientID: "src"}, Dialer(nil))
	require.NoError(t, err)
	defer s.Close()
	require.EqualValues(t, kafkaconn.RequestRetries, s.cl.OptValue(kgo.RequestRetries))
	require.Equal(t, kafkaconn.RetryTimeout, s.cl.OptValue(kgo.RetryTimeout))
	require.Equal(t, "src", s.cl.OptValue(kgo.ClientID))
}

// BufferBudget is FetchMaxBytes + MaxBufferedBytes: 16 MiB at defaults,
// following the options.
func TestBufferBudget(t *testing.T) {
	s, err := New(context.Background(), Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}})
	require.NoError(t, err)
	defer s.Close()
	require.EqualValues(t, 16<<20, s.BufferBudget())
	s2, err := New(context.Background(), Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, FetchMaxBytes: 32 << 20, PartitionMaxBytes: 4 << 20, MaxBufferedBytes: 64 << 20})
	require.NoError(t, err)
	defer s2.Close()
	require.EqualValues(t, 96<<20, s2.BufferBudget())
}
