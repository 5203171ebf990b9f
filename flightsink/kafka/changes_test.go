package kafka_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	kafkasink "github.com/flightline/flightline/flightsink/kafka"
	"github.com/flightline/flightline/internal/testkit/changetest"
)

// kcatRecords reads topic with kcat, an independent client, read_committed:
// one "key<TAB>value" line per record, NULL for a tombstone's value.
func kcatRecords(t *testing.T, topic, isolation string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcatBin(t), "-C", "-b", strings.Join(brokers(t), ","), "-t", topic,
		"-X", "isolation.level="+isolation, "-o", "beginning", "-e", "-q", "-Z", "-f", "%k\t%s\n").Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("kcat: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// Keyed change mode, value_format json, on one partition: every change is
// a record keyed by its id ({"id":N}), its value the row without the
// change columns, a delete a tombstone; a replay produces nothing; a null
// key, an unknown _op and a missing key column produce nothing.
func TestIntegrationKeyedChanges(t *testing.T) {
	mem := checkedMem(t)
	topic := createTopic(t, "changes", 1, nil)
	s := newSinkWith(t, kafkasink.Config{Topic: topic, ValueFormat: kafkasink.ValueJSON, Key: []string{"id"}})
	ctx := context.Background()
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: topic})
	require.NoError(t, err)
	defer w.Close(ctx)
	write := func(cp string, rows ...string) error {
		rec := changetest.Batch(mem, rows...)
		defer rec.Release()
		return w.WriteBatch(ctx, rec, []byte(cp))
	}
	require.NoError(t, write(`{"lsn":"0/1"}`, "insert 1 a", "insert 2 b", "insert 3 c"))
	// An update, a delete, a key update (2 → 20), a delete then a
	// re-insert, an insert then a delete, a null value.
	require.NoError(t, write(`{"lsn":"0/2"}`, "update 1 a2", "delete 2 -", "update 20 b", "delete 3 -", "insert 3 c2",
		"insert 5 e", "delete 5 -", "update 1 -"))
	want := []string{
		`{"id":1}` + "\t" + `{"id":1,"v":"a"}`,
		`{"id":2}` + "\t" + `{"id":2,"v":"b"}`,
		`{"id":3}` + "\t" + `{"id":3,"v":"c"}`,
		`{"id":1}` + "\t" + `{"id":1,"v":"a2"}`,
		`{"id":2}` + "\tNULL",
		`{"id":20}` + "\t" + `{"id":20,"v":"b"}`,
		`{"id":3}` + "\tNULL",
		`{"id":3}` + "\t" + `{"id":3,"v":"c2"}`,
		`{"id":5}` + "\t" + `{"id":5,"v":"e"}`,
		`{"id":5}` + "\tNULL",
		`{"id":1}` + "\t" + `{"id":1,"v":null}`,
	}
	require.Equal(t, want, kcatRecords(t, topic, "read_committed"))

	// A replay of the committed batch, with other changes: nothing.
	require.NoError(t, write(`{"lsn":"0/2"}`, "delete 1 -", "insert 9 x"))
	// Refused before anything is produced.
	err = write(`{"lsn":"0/3"}`, "insert 7 x", "insert null y")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Contains(t, err.Error(), `row 1: key column "id" is null`)
	err = write(`{"lsn":"0/3"}`, "insert 7 x", "upsert 8 y")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Contains(t, err.Error(), `"upsert"`)
	vb := array.NewStringBuilder(mem)
	vb.Append("x")
	v := vb.NewArray()
	vb.Release()
	noKey := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{v}, 1)
	v.Release()
	err = w.WriteBatch(ctx, noKey, []byte(`{"lsn":"0/3"}`))
	noKey.Release()
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	require.Equal(t, want, kcatRecords(t, topic, "read_uncommitted"), "neither the replay nor the refused batches produced a record")
	cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: topic})
	require.NoError(t, err)
	require.Equal(t, `{"lsn":"0/2"}`, string(cp))
}

// The key is the bytes of a single string key column, and a JSON object
// of the key columns in Key's order for several; without Key, the value
// holds every column, the change columns included (a change log).
func TestIntegrationKeyForms(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	for _, c := range []struct {
		key  []string
		want string
	}{
		{[]string{"v"}, "a\t" + `{"id":1,"v":"a"}`},
		{[]string{"v", "id"}, `{"v":"a","id":1}` + "\t" + `{"id":1,"v":"a"}`},
		{nil, "\t" + `{"id":1,"v":"a","_op":"insert","_lsn":100,"_commit_time":null}`},
	} {
		topic := createTopic(t, "keyforms", 1, nil)
		s := newSinkWith(t, kafkasink.Config{Topic: topic, ValueFormat: kafkasink.ValueJSON, Key: c.key})
		w, _, err := s.Open(ctx, flightsink.Pipeline{ID: topic})
		require.NoError(t, err)
		rec := changetest.Batch(mem, "insert 1 a")
		require.NoError(t, w.WriteBatch(ctx, rec, []byte("1")))
		rec.Release()
		require.NoError(t, w.Close(ctx))
		got := kcatRecords(t, topic, "read_committed")
		if c.key == nil {
			got[0] = strings.Replace(got[0], "NULL\t", "\t", 1) // a keyless record
		}
		require.Equal(t, []string{c.want}, got, "key %v", c.key)
	}
}

func TestKeyedConfigRefused(t *testing.T) {
	for _, cfg := range []kafkasink.Config{
		{ValueFormat: "avro"},
		{Key: []string{""}},
		{Key: []string{"_op"}},
		{Key: []string{"p"}, PartitionColumn: "p"},
	} {
		cfg.Brokers = []string{"127.0.0.1:1"}
		_, err := kafkasink.New(context.Background(), cfg)
		require.ErrorIs(t, err, flightline.ErrInvalidInput, "%+v", cfg)
	}
}
