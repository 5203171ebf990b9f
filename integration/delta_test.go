package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	srcdelta "github.com/flightline/flightline/flightsrc/delta"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// deltaLocation is where a Delta test writes: a temp dir, or a fresh
// prefix on the S3 server from the services script.
type deltaLocation struct {
	name    string
	uri     func(t *testing.T, name string) string
	storage func(t *testing.T) objstore.Options
}

var deltaLocations = []deltaLocation{
	{"local",
		func(t *testing.T, name string) string { return t.TempDir() + "/" + name },
		func(*testing.T) objstore.Options { return nil }},
	{"s3",
		func(t *testing.T, name string) string {
			return fmt.Sprintf("s3://%s/it-%d/%s", s3test.Bucket, time.Now().UnixNano(), name)
		},
		func(t *testing.T) objstore.Options { return s3test.Options(t) }},
}

type deltaCheck struct {
	Version        int64             `json:"version"`
	Rows           int64             `json:"rows"`
	Distinct       int64             `json:"distinct"`
	Min            *int64            `json:"min"`
	Max            *int64            `json:"max"`
	Schema         map[string]string `json:"schema"`
	Protocol       []int             `json:"protocol"`
	OurCommits     int               `json:"our_commits"`
	LastCheckpoint string            `json:"last_checkpoint"`
	Txn            *int64            `json:"txn"`
	Sample         []map[string]any  `json:"sample"`
}

// deltaRs runs an integration/python script with delta-rs.
func deltaRs(t *testing.T, storage objstore.Options, script string, args ...string) []byte {
	t.Helper()
	return deltaRsEnv(t, nil, storage, script, args...)
}

// deltaRsEnv is deltaRs with more of the script's environment (KEY=VALUE),
// which a parallel test cannot set with t.Setenv.
func deltaRsEnv(t *testing.T, env []string, storage objstore.Options, script string, args ...string) []byte {
	t.Helper()
	py := Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	js, _ := json.Marshal(storage)
	cmd := exec.Command(py, append([]string{"python/" + script}, args...)...)
	cmd.Env = append(append(os.Environ(), "FLIGHTLINE_DELTA_STORAGE="+string(js), "FLIGHTLINE_DELTA_ROWS=1"), env...)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("%s failed: %v\n%s\n%s", script, err, out, ee.Stderr)
	}
	require.NoError(t, err)
	return out
}

func checkWithDeltaRs(t *testing.T, uri string, storage objstore.Options, args ...string) deltaCheck {
	t.Helper()
	return parseDeltaCheck(t, deltaRs(t, storage, "delta_check.py", append([]string{uri}, args...)...))
}

// checkWithDeltaRsID checks a local table whose id column is idCol.
func checkWithDeltaRsID(t *testing.T, uri, idCol string) deltaCheck {
	t.Helper()
	return parseDeltaCheck(t, deltaRsEnv(t, []string{"FLIGHTLINE_DELTA_ID=" + idCol}, nil, "delta_check.py", uri))
}

func parseDeltaCheck(t *testing.T, out []byte) deltaCheck {
	t.Helper()
	var c deltaCheck
	require.NoErrorf(t, json.Unmarshal(out, &c), "%s", out)
	t.Logf("delta-rs: %s", strings.TrimSpace(string(out)))
	return c
}

// richSchema covers the type map: every Delta primitive Flightline writes
// and the nested types.
var richSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "local_ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "small", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "ratio", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), Nullable: true},
	{Name: "addr", Type: arrow.StructOf(arrow.Field{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "zip", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
}, nil)

func richBatch(t *testing.T, mem memory.Allocator, from, to int64) arrow.RecordBatch {
	var sb strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&sb, `{"id":%d,"name":"n%d","amount":"%d.%02d","ts":%d,"local_ts":%d,`+
			`"day":"2026-03-%02d","flag":%v,"small":%d,"ratio":%d.5,"blob":"aGk=","tags":["a","b%d"],`+
			`"attrs":[{"key":"k","value":%d}],"addr":{"city":"c%d","zip":%d}}`+"\n",
			i, i, i, i%100, 1767225600000+i, 1767225600123456+i, 1+i%28, i%2 == 0, i%300, i, i, i, i, i)
	}
	rec, _, err := array.RecordFromJSON(mem, richSchema, strings.NewReader(sb.String()), array.WithMultipleDocs())
	require.NoError(t, err)
	return rec
}

// TestIntegrationDeltaInterop: delta-rs reads what the sink writes (rows,
// schema, history, txn), through a Delta checkpoint; our source reads what
// delta-rs writes. On local disk and on S3 (versitygw).
func TestIntegrationDeltaInterop(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	for _, loc := range deltaLocations {
		t.Run(loc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			storage := loc.storage(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()

			// Our sink writes; delta-rs reads, through a checkpoint of
			// several row groups (a large table's have 8192 rows each).
			defer deltalog.SetCheckpointRowGroupRows(4)()
			uri := loc.uri(t, "rich")
			s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri, Storage: storage, CheckpointInterval: 4}, sinkdelta.Allocator(mem))
			require.NoError(t, err)
			p := flightsink.Pipeline{ID: "interop"}
			w, _, err := s.Open(ctx, p)
			require.NoError(t, err)
			const batches, per = 9, 100
			var last []byte
			for b := int64(0); b < batches; b++ {
				rec := richBatch(t, mem, b*per, b*per+per)
				last = checkpoint.Positions{"rich/0": b*per + per}.Encode()
				require.NoError(t, w.WriteBatch(ctx, rec, last))
				rec.Release()
			}
			require.NoError(t, w.Close(ctx))
			st, err := objstore.Open(ctx, uri, storage)
			require.NoError(t, err)
			cpb, err := st.Get(ctx, "_delta_log/00000000000000000008.checkpoint.parquet")
			require.NoError(t, err)
			pf, err := file.NewParquetReader(bytes.NewReader(cpb))
			require.NoError(t, err)
			require.Greater(t, pf.NumRowGroups(), 2, "the checkpoint of version 8 spans row groups")
			require.NoError(t, pf.Close())
			c := checkWithDeltaRs(t, uri, storage, "interop", "interop")
			require.Equal(t, int64(batches*per), c.Rows)
			require.Equal(t, int64(batches*per), c.Distinct)
			require.Equal(t, []int{3, 7}, c.Protocol, "timestamp_ntz needs reader 3 (timestampNtz); domainMetadata writer 7")
			require.Equal(t, map[string]string{
				"id": "int64", "name": "string", "amount": "decimal128(12, 2)", "ts": "timestamp[us, tz=UTC]",
				"local_ts": "timestamp[us]", "day": "date32[day]", "flag": "bool", "small": "int16", "ratio": "float",
				"blob": "binary", "tags": "list<element: string>", "attrs": "map<string, int64>",
				"addr": "struct<city: string, zip: int32>",
			}, normaliseTypes(c.Schema))
			require.Equal(t, batches, c.OurCommits)
			require.Equal(t, string(last), c.LastCheckpoint, "commitInfo carries the checkpoint keyed by pipeline_id")
			require.NotNil(t, c.Txn)
			require.Equal(t, int64(batches), *c.Txn, "transaction_version(pipeline_id) counts its commits")
			require.Equal(t, "n0", c.Sample[0]["name"])

			// delta-rs writes; our source reads it back (once mode).
			pyURI := loc.uri(t, "from_delta_rs")
			deltaRs(t, storage, "delta_write.py", pyURI, "5000")
			src, err := srcdelta.New(ctx, srcdelta.Config{URI: pyURI, StorageOptions: storage, Once: true, BatchRows: 1000}, srcdelta.Allocator(mem))
			require.NoError(t, err)
			streams, err := src.Streams(ctx)
			require.NoError(t, err)
			require.Equal(t, "id", streams[0].Schema.Field(0).Name)
			r, err := src.Read(ctx, flightsrc.ReadRequest{Stream: streams[0].Name})
			require.NoError(t, err)
			seen := map[int64]int{}
			for {
				rec, _, err := r.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
					seen[id]++
				}
				rec.Release()
			}
			require.NoError(t, r.Close())
			require.Len(t, seen, 5000)
			for id, n := range seen {
				require.Equalf(t, 1, n, "id %d", id)
			}
		})
	}
}

func normaliseTypes(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		v = strings.ReplaceAll(v, "large_", "")
		v = strings.ReplaceAll(v, "string_view", "string")
		v = strings.ReplaceAll(v, "binary_view", "binary")
		v = strings.ReplaceAll(v, "list<item: ", "list<element: ")
		out[k] = v
	}
	return out
}

// TestIntegrationDeltaCrashKill9 runs generator → Delta in one flightline
// process and kill -9s it at random points (10 times; 30 under
// FLIGHTLINE_CHAOS=1), restarting
// it each time; then a bounded run finishes a little past the committed
// checkpoint, and delta-rs must find every id in [0, N) exactly once. On
// local disk and S3; the S3 credentials reach the child through the AWS
// SDK's default chain (environment), the endpoint through the sink spec.
func TestIntegrationDeltaCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	for _, loc := range deltaLocations {
		t.Run(loc.name, func(t *testing.T) {
			storage := loc.storage(t)
			uri := loc.uri(t, "crash_orders")
			spec := "delta:" + uri + "?checkpoint_interval=7"
			if storage != nil {
				spec += "&AWS_ENDPOINT_URL=" + storage[objstore.EndpointURL] + "&AWS_ALLOW_HTTP=true&AWS_REGION=us-east-1"
				t.Setenv("AWS_ACCESS_KEY_ID", storage[objstore.AccessKeyID])
				t.Setenv("AWS_SECRET_ACCESS_KEY", storage[objstore.SecretAccessKey])
			}
			generator := func(rows int64) string {
				return fmt.Sprintf("generator:?rows=%d&batch_rows=500&interval=2ms", rows)
			}
			crashDelta(t, generator, spec, uri, storage)
		})
	}
}

// crashDelta is the kill -9 loop with a swappable source spec (the Kafka
// source plugs in here once it lands).
func crashDelta(t *testing.T, source func(rows int64) string, sinkSpec, uri string, storage objstore.Options) {
	bin := flightlineBin(t)
	const pipeline = "crash"
	args := func(rows int64) []string {
		return []string{"run", "--source", source(rows), "--sink", sinkSpec, "--stream", "orders",
			"--pipeline", pipeline, "--log-level", "warn"}
	}
	kills := killCount(10, 30)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// committed reads the table's checkpoint of the pipeline: 0 before
	// its first commit.
	committed := func() int64 {
		s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri, Storage: storage})
		require.NoError(t, err)
		cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: pipeline})
		require.NoError(t, err)
		if len(cp) == 0 {
			return 0
		}
		pos, err := checkpoint.Parse(cp)
		require.NoError(t, err)
		return pos["orders/0"]
	}
	killRuns(t, kills, func() time.Duration { return time.Duration(150+rng.IntN(600)) * time.Millisecond },
		func() *proc { return start(t, bin, args(0)...) }, // unbounded: it cannot finish before its kill
		func() bool { return committed() > 0 })
	s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri, Storage: storage})
	require.NoError(t, err)
	committedRows := committed()
	require.Positive(t, committedRows, "the killed runs committed nothing")
	n := committedRows + 20_000
	t.Logf("killed %d times; %d rows committed by then; finishing at %d", kills, committedRows, n)
	final := start(t, bin, args(n)...)
	select {
	case err := <-final.doneOnce():
		require.NoError(t, err, final.log.String())
	case <-ctx.Done():
		t.Fatalf("final run did not finish:\n%s", final.log.String())
	}
	c := checkWithDeltaRs(t, uri, storage, pipeline, pipeline+"/orders/0")
	require.Equal(t, n, c.Rows, "every record exactly once: rows")
	require.Equal(t, n, c.Distinct, "every record exactly once: distinct ids")
	require.Equal(t, int64(0), *c.Min)
	require.Equal(t, n-1, *c.Max)
	require.NotNil(t, c.Txn)
	require.Equal(t, n, *c.Txn, "txn(pipeline/partition) holds the partition's position")
	cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: pipeline})
	require.NoError(t, err)
	require.Equal(t, string(checkpoint.Positions{"orders/0": n}.Encode()), string(cp))
}
