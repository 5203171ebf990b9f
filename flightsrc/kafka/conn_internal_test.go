package kafka

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline"
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

// The Config's TLS and SASL set the connection's; an unknown mechanism is
// refused in New.
func TestSourceConfigAuth(t *testing.T) {
	s, err := New(context.Background(), Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"},
		TLS: &tls.Config{ServerName: "b"}, SASL: "scram-sha-512", User: "u", Password: "p"})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "SCRAM-SHA-512", s.cfg.auth.SASLName)
	require.Equal(t, "b", s.cfg.auth.TLS.ServerName)
	_, err = New(context.Background(), Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, SASL: "SCRAM-MD5"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
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
