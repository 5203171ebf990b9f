package flightsrc_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// viewSource sends one batch with a binary_view and a string_view column,
// then ends. compact is its WireCompacter answer.
type viewSource struct {
	mem     memory.Allocator
	compact bool
}

var viewSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.BinaryTypes.BinaryView, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.StringView, Nullable: true},
}, nil)

func (s viewSource) CompactOnWire() bool { return s.compact }
func (s viewSource) Streams(context.Context) ([]flightsrc.Stream, error) {
	return []flightsrc.Stream{{Name: "v", Schema: viewSchema}}, nil
}
func (s viewSource) Read(context.Context, flightsrc.ReadRequest) (flightsrc.Reader, error) {
	return &viewReader{mem: s.mem}, nil
}
func (s viewSource) Commit(context.Context, flightsrc.CommitRequest) error { return nil }

type viewReader struct {
	mem  memory.Allocator
	sent bool
}

func (r *viewReader) Schema() *arrow.Schema { return viewSchema }
func (r *viewReader) Next(context.Context) (arrow.RecordBatch, []byte, error) {
	if r.sent {
		return nil, nil, io.EOF
	}
	r.sent = true
	b := array.NewRecordBuilder(r.mem, viewSchema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	kb := b.Field(1).(*array.BinaryViewBuilder)
	kb.Append([]byte("a key longer than twelve bytes"))
	kb.AppendNull()
	kb.Append([]byte("k3"))
	nb := b.Field(2).(*array.StringViewBuilder)
	nb.Append("one")
	nb.Append("a name longer than twelve bytes")
	nb.AppendNull()
	return b.NewRecordBatch(), []byte("cp"), nil
}
func (r *viewReader) Close() error { return nil }

// The server compacts view columns when the source declares it
// (WireCompacter) or CompactViews(true) says so, and not otherwise: the
// listed schema, the stream's schema and every batch agree, the values
// survive, and the copies are released.
func TestServerCompactsViews(t *testing.T) {
	for _, c := range []struct {
		name     string
		declares bool
		opts     []flightsrc.ServerOption
		want     bool
	}{
		{"source declares", true, nil, true},
		{"source does not declare", false, nil, false},
		{"option overrides to off", true, []flightsrc.ServerOption{flightsrc.CompactViews(false)}, false},
		{"option overrides to on", false, []flightsrc.ServerOption{flightsrc.CompactViews(true)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the server stopped
			opts := append([]flightsrc.ServerOption{flightsrc.WithAllocator(mem), flightsrc.WithLogger(quiet)}, c.opts...)
			url := flighttest.Serve(t, flightsrc.NewServer(viewSource{mem: mem, compact: c.declares}, opts...), endpoint.ServerConfig{})
			cl, err := flightsrc.DialWithAllocator(url, flightsrc.ClientConfig{}, mem)
			require.NoError(t, err)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			want := viewSchema
			if c.want {
				want = arrow.NewSchema([]arrow.Field{
					{Name: "id", Type: arrow.PrimitiveTypes.Int64},
					{Name: "key", Type: arrow.BinaryTypes.Binary, Nullable: true},
					{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
				}, nil)
			}
			streams, err := cl.Streams(ctx)
			require.NoError(t, err)
			require.Len(t, streams, 1)
			require.True(t, want.Equal(streams[0].Schema), "listed schema %s", streams[0].Schema)

			rd, err := cl.Read(ctx, flightsrc.ReadRequest{Stream: "v"})
			require.NoError(t, err)
			defer rd.Close()
			require.True(t, want.Equal(rd.Schema()), "stream schema %s", rd.Schema())
			rec, cp, err := rd.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, "cp", string(cp))
			require.True(t, want.Equal(rec.Schema()), "batch schema %s", rec.Schema())
			js, err := rec.MarshalJSON()
			rec.Release()
			require.NoError(t, err)
			require.JSONEq(t, `[{"id":1,"key":"YSBrZXkgbG9uZ2VyIHRoYW4gdHdlbHZlIGJ5dGVz","name":"one"},
				{"id":2,"key":null,"name":"a name longer than twelve bytes"},
				{"id":3,"key":"azM=","name":null}]`, string(js))
			_, _, err = rd.Next(ctx)
			require.ErrorIs(t, err, io.EOF)
		})
	}
}
