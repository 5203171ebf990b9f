package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/endpoint"
)

func TestKafkaSpecs(t *testing.T) {
	// kafka.New does not connect, so these need no broker.
	open := func(spec string) error {
		_, closeSrc, err := openSource(testEnv, spec, endpoint.ClientConfig{})
		if err == nil {
			closeSrc()
		}
		return err
	}
	require.NoError(t, open("kafka:?brokers=127.0.0.1:1,127.0.0.1:2&topics=a,b&group=g&reset=latest&batch_rows=500&batch_bytes=1048576&batch_wait=100ms&membership=false&isolation=read_uncommitted&client_id=c"))
	require.NoError(t, open("kafka:?brokers=h:1&topic_regex=orders-.*&session_timeout=6s&instance_id=i1"))
	require.NoError(t, open("kafka:?brokers=h:1&topics=a&fetch_max_bytes=4194304&partition_max_bytes=1048576&max_buffered_bytes=8388608&max_parked_bytes=0&decode_bytes=65536"))
	require.ErrorContains(t, open("kafka:?brokers=h:1&topics=a&max_buffered_bytes=0"), "max buffered bytes")
	require.ErrorContains(t, open("kafka:?brokers=h:1&topics=a&partition_max_bytes=lots"), "partition_max_bytes")
	t.Setenv("KPASS", "secret")
	require.NoError(t, open("kafka:?brokers=h:1&topics=a&sasl=scram-sha-512&user=u&password_env=KPASS&tls=true"))

	schema := filepath.Join(t.TempDir(), "order.avsc")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type":"record","name":"o","fields":[{"name":"id","type":"long"}]}`), 0o644))
	require.NoError(t, open("kafka:?brokers=h:1&topics=a&format=json&schema="+schema))
	require.NoError(t, open("kafka:?brokers=h:1&topics=a&format=avro&schema="+schema+"&dead_letters="+filepath.Join(t.TempDir(), "dl.jsonl")))

	require.ErrorContains(t, open("kafka:?brokers=h:1&topics=a&colour=blue"), "unknown option(s) colour")
	require.ErrorContains(t, open("kafka:?topics=a"), "bootstrap servers")
	require.ErrorContains(t, open("kafka:?brokers=h:1"), "topic")
	require.ErrorContains(t, open("kafka:?brokers=h:1&topics=a&reset=middle"), "earliest or latest")
	require.ErrorContains(t, open("kafka:?brokers=h:1&topics=a&format=json"), "schema=")
	require.ErrorContains(t, open("kafka:?brokers=h:1&topics=a&format=xml"), "format")
	require.ErrorContains(t, open("kafka:?brokers=h:1&topics=a&sasl=plain&user=u&password_env=NOPE_UNSET"), "NOPE_UNSET")
	require.ErrorContains(t, open("kafka:?brokers=h:1&topics=a&batch_wait=soon"), "batch_wait")
	require.Contains(t, kindUsage(), "kafka:?brokers=")
}
