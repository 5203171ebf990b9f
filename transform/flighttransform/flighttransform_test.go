package flighttransform_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
	"github.com/flightline/flightline/transform"
	"github.com/flightline/flightline/transform/flighttransform"
	tt "github.com/flightline/flightline/transform/transformtest"
)

// doubled adds a column "double" = id*2 from mem.
func doubled(mem memory.Allocator) transform.Func {
	return func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		for _, v := range rec.Column(0).(*array.Int64).Int64Values() {
			b.Append(v * 2)
		}
		d := b.NewArray()
		defer d.Release()
		sc := arrow.NewSchema(append(rec.Schema().Fields(), arrow.Field{Name: "double", Type: arrow.PrimitiveTypes.Int64}), nil)
		return array.NewRecordBatch(sc, append(rec.Columns(), d), rec.NumRows()), nil
	}
}

// serve serves t and returns a client of it; both allocators are checked
// for zero bytes after the server has stopped.
func serve(t *testing.T, tr func(mem memory.Allocator) transform.Transform) (*flighttransform.Client, memory.Allocator) {
	t.Helper()
	smem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cmem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { smem.AssertSize(t, 0); cmem.AssertSize(t, 0) })
	url := flighttest.Serve(t, flighttransform.NewServer(tr(smem), flighttransform.WithServerAllocator(smem)), endpoint.ServerConfig{})
	c, err := flighttransform.Dial(url, flightline.ClientConfig{}, flighttransform.WithAllocator(cmem), flighttransform.ForPipeline("p", "s"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, cmem
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// A Go transform over DoExchange: outputs in order with their input's
// checkpoints, a new schema, 0-row inputs answered.
func TestExchangeRoundTrip(t *testing.T) {
	c, cmem := serve(t, func(mem memory.Allocator) transform.Transform { return transform.Map(doubled(mem)) })
	items := tt.Batches(cmem, 4, 100)
	items = append(items, tt.Item{Rec: tt.Batch(cmem, 0, 0), CP: []byte(`{"positions":{"t/0":401}}`)})
	out, err := transform.Checked(c.String(), c, cmem).Exchange(ctx(t), tt.NewSlice(items))
	require.NoError(t, err)
	rec, cp, err := out.Next(ctx(t))
	require.NoError(t, err)
	require.Equal(t, "id,name,double", tt.FieldNames(rec))
	require.Equal(t, int64(198), rec.Column(2).(*array.Int64).Value(99))
	require.Equal(t, `{"positions":{"t/0":100}}`, string(cp))
	rec.Release()
	got, err := tt.Drain(ctx(t), out)
	require.NoError(t, err)
	require.Equal(t, []int64{100, 100, 100, 0}, got.Rows)
	require.Equal(t, `{"positions":{"t/0":401}}`, got.CPs[3])
}

// An exchange whose input is empty ends cleanly, with or without a schema
// sent up front.
func TestExchangeEmpty(t *testing.T) {
	c, cmem := serve(t, func(mem memory.Allocator) transform.Transform { return transform.Map(doubled(mem)) })
	out, err := transform.Checked(c.String(), c, cmem).Exchange(ctx(t), tt.NewSlice(nil))
	require.NoError(t, err)
	got, err := tt.Drain(ctx(t), out)
	require.NoError(t, err)
	require.Empty(t, got.Rows)
}

// The service's errors reach the client as Flightline errors: bad input
// stops the pipeline, an outage is retried.
func TestExchangeServiceErrors(t *testing.T) {
	for _, c := range []struct {
		err       error
		retryable bool
	}{
		{fmt.Errorf("%w: column x is missing", flightline.ErrInvalidInput), false},
		{fmt.Errorf("%w: model server down", flightline.ErrUnavailable), true},
	} {
		t.Run(c.err.Error(), func(t *testing.T) {
			cl, cmem := serve(t, func(memory.Allocator) transform.Transform {
				n := 0
				return transform.Map(func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
					if n++; n == 2 {
						return nil, c.err
					}
					rec.Retain()
					return rec, nil
				})
			})
			out, err := transform.Checked(cl.String(), cl, cmem).Exchange(ctx(t), tt.NewSlice(tt.Batches(cmem, 4, 10)))
			require.NoError(t, err)
			got, err := tt.Drain(ctx(t), out)
			require.Error(t, err)
			require.ErrorContains(t, err, c.err.Error())
			require.Equal(t, c.retryable, flightline.IsRetryable(err), "%v", err)
			require.LessOrEqual(t, len(got.Rows), 1)
		})
	}
}

// bogus answers every input with a checkpoint of its own.
type bogus struct{}

func (bogus) Exchange(_ context.Context, in transform.Stream) (transform.Stream, error) {
	return bogusStream{in}, nil
}

type bogusStream struct{ in transform.Stream }

func (b bogusStream) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	rec, _, err := b.in.Next(ctx)
	return rec, []byte(`{"positions":{"t/0":999999}}`), err
}
func (b bogusStream) Close() error { return b.in.Close() }

// A remote service that invents a checkpoint stops the pipeline with a
// clear, non-retryable error naming it.
func TestExchangeContractViolation(t *testing.T) {
	c, cmem := serve(t, func(memory.Allocator) transform.Transform { return bogus{} })
	out, err := transform.Checked(c.String(), c, cmem).Exchange(ctx(t), tt.NewSlice(tt.Batches(cmem, 3, 10)))
	require.NoError(t, err)
	_, err = tt.Drain(ctx(t), out)
	require.ErrorIs(t, err, transform.ErrContract)
	require.False(t, flightline.IsRetryable(err))
	require.ErrorContains(t, err, c.String())
	require.ErrorContains(t, err, "never sent to it as input")
}

// An error of the input (a source outage) is what the output reports,
// not the cancellation it causes.
func TestExchangeInputError(t *testing.T) {
	c, cmem := serve(t, func(mem memory.Allocator) transform.Transform { return transform.Map(doubled(mem)) })
	items := tt.Batches(cmem, 2, 10)
	items = append(items, tt.Item{Err: fmt.Errorf("%w: broker gone", flightline.ErrUnavailable)})
	out, err := transform.Checked(c.String(), c, cmem).Exchange(ctx(t), tt.NewSlice(items))
	require.NoError(t, err)
	_, err = tt.Drain(ctx(t), out)
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.ErrorContains(t, err, "broker gone")
}

// Closing an exchange mid-stream (a stop, a restart) and cancelling its
// context both end it promptly, with every batch released on both sides.
func TestExchangeCancel(t *testing.T) {
	for _, how := range []string{"close", "cancel"} {
		t.Run(how, func(t *testing.T) {
			c, cmem := serve(t, func(mem memory.Allocator) transform.Transform { return transform.Map(doubled(mem)) })
			in := tt.NewSlice(tt.Batches(cmem, 8, 1000))
			in.Block = true // an unbounded source
			xctx, cancel := context.WithCancel(ctx(t))
			defer cancel()
			out, err := transform.Checked(c.String(), c, cmem).Exchange(xctx, in)
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				rec, _, err := out.Next(ctx(t))
				require.NoError(t, err)
				rec.Release()
			}
			if how == "cancel" {
				cancel()
				for {
					rec, _, err := out.Next(ctx(t))
					if err != nil {
						require.True(t, errors.Is(err, context.Canceled), "%v", err)
						break
					}
					rec.Release() // already on its way
				}
			}
			require.NoError(t, out.Close())
		})
	}
}
