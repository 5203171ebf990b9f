package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/parquetw"
)

func pos(kv ...any) []byte {
	p := checkpoint.Positions{}
	for i := 0; i < len(kv); i += 2 {
		p[kv[i].(string)] = int64(kv[i+1].(int))
	}
	return p.Encode()
}

func TestObjectName(t *testing.T) {
	// A Kafka-like batch advances one partition: named by it and its end.
	prev := pos("orders/0", 100, "orders/1", 50)
	require.Equal(t, "orders!2F1~00000000000000000070.parquet", ObjectName(prev, pos("orders/0", 100, "orders/1", 70)))
	// The same end after a different start (a restart that stepped over a
	// transaction marker) is the same object.
	require.Equal(t, ObjectName(prev, pos("orders/0", 100, "orders/1", 70)),
		ObjectName(pos("orders/0", 100, "orders/1", 51), pos("orders/0", 100, "orders/1", 70)))
	// Unknown prev: every partition of cp.
	require.Equal(t, "orders!2F0~00000000000000000100~orders!2F1~00000000000000000070.parquet",
		ObjectName(nil, pos("orders/0", 100, "orders/1", 70)))
	// Deterministic whatever the encoding of prev (canonical or not).
	require.Equal(t, ObjectName([]byte(`{"positions":{"orders/1":50, "orders/0":100}}`), pos("orders/0", 100, "orders/1", 70)),
		ObjectName(prev, pos("orders/0", 100, "orders/1", 70)))
	// Leading '_' or '.' and unsafe bytes are escaped; '~' never appears
	// inside a field.
	require.Equal(t, "!5Fx!7E!20y~00000000000000000001.parquet", ObjectName(nil, pos("_x~ y", 1)))
	require.Equal(t, "!2Ea.b_c~00000000000000000001.parquet", ObjectName(nil, pos(".a.b_c", 1)))

	// Long names are hashed, deterministically.
	big, bigPrev := checkpoint.Positions{}, checkpoint.Positions{}
	for i := range 64 {
		big[fmt.Sprintf("topic-with-a-long-name/%d", i)] = int64(1000 + i)
		bigPrev[fmt.Sprintf("topic-with-a-long-name/%d", i)] = 0
	}
	n := ObjectName(bigPrev.Encode(), big.Encode())
	require.True(t, strings.HasPrefix(n, "~") && len(n) == 1+64+len(".parquet"), n)
	require.Equal(t, n, ObjectName(bigPrev.Encode(), big.Encode()))
	big["topic-with-a-long-name/3"]++
	require.NotEqual(t, n, ObjectName(bigPrev.Encode(), big.Encode()))

	// Opaque checkpoints: a hash of the checkpoint alone.
	o := ObjectName([]byte("a"), []byte("v42"))
	require.Equal(t, o, ObjectName(nil, []byte("v42")))
	require.NotEqual(t, o, ObjectName(nil, []byte("v43")))
	require.NotEqual(t, '_', o[0])
}

func TestParseLocation(t *testing.T) {
	b, p, err := ParseLocation("my-bucket/a/b/")
	require.NoError(t, err)
	require.Equal(t, "my-bucket", b)
	require.Equal(t, "a/b", p)
	b, p, err = ParseLocation("my-bucket")
	require.NoError(t, err)
	require.Equal(t, "my-bucket", b)
	require.Equal(t, "", p)

	_, _, err = ParseLocation("s3://my-bucket/events")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Contains(t, err.Error(), `give it as bucket/prefix, e.g. "my-bucket/events"`)
	_, err = New(context.Background(), Config{Location: "s3a://my-bucket/events"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	for _, bad := range []string{"", "/", "ab", "bucket/a//b", "bucket/../x"} {
		_, _, err := ParseLocation(bad)
		require.ErrorIsf(t, err, flightline.ErrInvalidInput, "%q", bad)
	}
	_, err = New(context.Background(), Config{Location: "bucket/p", Storage: map[string]string{"AWS_SECRET": "x"}})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

func TestDir(t *testing.T) {
	d, err := Dir(flightsink.Pipeline{ID: "orders-to-s3"})
	require.NoError(t, err)
	require.Equal(t, "orders-to-s3", d)
	d, err = Dir(flightsink.Pipeline{ID: "p1", Target: "raw/orders"})
	require.NoError(t, err)
	require.Equal(t, "raw/orders/p1", d)
	for _, p := range []flightsink.Pipeline{{ID: ""}, {ID: "a/b"}, {ID: "_hidden"}, {ID: "p", Target: "a//b"}, {ID: "p", Target: "../x"}} {
		_, err := Dir(p)
		require.ErrorIsf(t, err, flightline.ErrInvalidInput, "%+v", p)
	}
}

func TestSchemaObjectRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := &Sink{o: options{mem: mem}}
	data, err := encodeSchema(s, sinktest.Schema)
	require.NoError(t, err)
	sc, err := decodeSchema(data)
	require.NoError(t, err)
	require.True(t, flightsink.SameSchema(sinktest.Schema, sc), "%s", sc)
	_, err = decodeSchema([]byte("not parquet"))
	require.Error(t, err)
	require.False(t, errors.Is(err, flightline.ErrNotFound))
}

func TestStoredSchemasCompareAsReadersSeeThem(t *testing.T) {
	s := &Sink{o: options{mem: memory.NewGoAllocator()}}
	stored := func(sc *arrow.Schema) *arrow.Schema {
		data, err := encodeSchema(s, parquetw.StoredSchema(sc))
		require.NoError(t, err)
		out, err := decodeSchema(data)
		require.NoError(t, err)
		return out
	}
	ts := func(u arrow.TimeUnit, view bool) *arrow.Schema {
		k := arrow.DataType(arrow.BinaryTypes.Binary)
		if view {
			k = arrow.BinaryTypes.BinaryView
		}
		return arrow.NewSchema([]arrow.Field{
			{Name: "at", Type: &arrow.TimestampType{Unit: u, TimeZone: "UTC"}},
			{Name: "key", Type: k, Nullable: true},
			{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		}, nil)
	}
	require.True(t, flightsink.SameSchema(stored(ts(arrow.Millisecond, true)), stored(ts(arrow.Microsecond, false))))
	other := arrow.NewSchema([]arrow.Field{{Name: "at", Type: arrow.PrimitiveTypes.Int64}}, nil)
	require.False(t, flightsink.SameSchema(stored(ts(arrow.Millisecond, true)), stored(other)))
}
