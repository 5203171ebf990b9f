package databricks_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/databricks"
	"github.com/flightline/flightline/flightsrc/delta"
	"github.com/flightline/flightline/flightsrc/srctest"
	"github.com/flightline/flightline/internal/testkit/uctest"
	"github.com/flightline/flightline/internal/unitycatalog"
)

// The source conformance suite through the catalog: each stream is a table
// of the fake catalog on moto, filled by the Delta sink with fixed keys
// (directly) and read with vended READ credentials that expire after 6 s,
// through the proxy that refuses expired ones.
func TestIntegrationConformance(t *testing.T) {
	e := uctest.NewMotoEnv(t)
	e.SetCredentialLife(6 * time.Second)
	prefix := fmt.Sprintf("s3://%s/src-conformance-%d", uctest.Bucket, time.Now().UnixNano())
	for _, once := range []bool{true, false} {
		t.Run(fmt.Sprintf("once=%v", once), func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			srctest.Run(t, srctest.Harness{
				NewStream: func(t *testing.T) string {
					mu.Lock()
					defer mu.Unlock()
					n++
					name := fmt.Sprintf("orders_%v_%d", once, n)
					e.AddExternal("main.src."+name, prefix+"/"+name)
					return name
				},
				Append: func(t *testing.T, stream string, from, to int64) {
					ctx := context.Background()
					s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: prefix + "/" + stream, CheckpointInterval: 4, Storage: e.DirectOptions()})
					require.NoError(t, err)
					w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "fill"})
					require.NoError(t, err)
					for i := from; i < to; i += 9 {
						end := min(i+9, to)
						rec := flightsrc.GenerateOrders(memory.DefaultAllocator, i, end)
						err := w.WriteBatch(ctx, rec, checkpoint.Positions{"fill/0": end}.Encode())
						rec.Release()
						require.NoError(t, err)
					}
					require.NoError(t, w.Close(ctx))
				},
				NewSource: func(t *testing.T, mem memory.Allocator, stream string) flightsrc.Source {
					s, err := databricks.New(context.Background(), databricks.Config{Table: "main.src." + stream,
						Workspace:      unitycatalog.Config{Host: e.URL, ClientID: e.ClientID, ClientSecret: e.ClientSecret},
						StorageOptions: e.StorageOptions(), VendMargin: time.Millisecond,
						Once: once, BatchRows: 4, PollInterval: 20 * time.Millisecond},
						databricks.DeltaOptions(delta.Allocator(mem)))
					require.NoError(t, err)
					t.Cleanup(func() { _ = s.Close() })
					return s
				},
				Records: func(t *testing.T, _ string, rec arrow.RecordBatch) []srctest.Record {
					col := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
					out := make([]srctest.Record, rec.NumRows())
					for i := range out {
						out[i].ID = col.Value(i)
					}
					return out
				},
				Bounded:                 once,
				DeterministicBoundaries: true,
			})
		})
	}
	require.Zero(t, e.Stats().ExpiredRejected)
	require.Positive(t, e.Stats().S3Requests)
}

func TestSourceRefusals(t *testing.T) {
	s := uctest.New(t, uctest.Static())
	s.AddTable(unitycatalog.Table{FullName: "main.sales.view", TableType: "VIEW"})
	s.AddTable(unitycatalog.Table{FullName: "main.sales.managed", TableType: "MANAGED", DataSourceFormat: "DELTA", StorageLocation: "gs://x/y"})
	ws := unitycatalog.Config{Host: s.URL, Token: s.Token}
	ctx := context.Background()
	_, err := databricks.New(ctx, databricks.Config{Table: "main.sales.nope", Workspace: ws})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	_, err = databricks.New(ctx, databricks.Config{Table: "main.sales.view", Workspace: ws})
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	_, err = databricks.New(ctx, databricks.Config{Table: "main.sales.managed", Workspace: ws})
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.ErrorContains(t, err, "not on S3", "managed tables may be read, but only on S3")
}
