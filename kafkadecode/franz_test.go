package kafkadecode

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// codecs are franz-go's producer codecs, by name.
var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// randomRecord makes a record with nil/empty/short/long keys and values,
// headers with null values, and explicit timestamps.
func randomRecord(rng *rand.Rand, i int) *kgo.Record {
	r := &kgo.Record{Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*997 + rng.Int64N(1000))}
	blob := func() []byte {
		switch rng.IntN(5) {
		case 0:
			return nil
		case 1:
			return []byte{}
		case 2:
			return []byte(fmt.Sprintf("k%d", i)) // inline (≤ 12 bytes)
		default:
			b := make([]byte, 13+rng.IntN(1000))
			for j := range b {
				b[j] = byte('a' + rng.IntN(26))
			}
			return b
		}
	}
	r.Key, r.Value = blob(), blob()
	for h := range rng.IntN(3) {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: fmt.Sprintf("h%d", h), Value: blob()})
	}
	return r
}

type cluster struct {
	c     *kfake.Cluster
	addrs []string
	topic string
	id    [16]byte
}

func newCluster(t *testing.T, topic string) *cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl := &cluster{c: c, addrs: c.ListenAddrs(), topic: topic}
	client := cl.client(t)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), client)
	if err != nil || len(resp.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	cl.id = resp.Topics[0].TopicID
	return cl
}

func (cl *cluster) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cl.addrs...), kgo.DefaultProduceTopic(cl.topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// produce writes several batches: plain ones, committed transactions and
// aborted transactions, with the given codec. It returns how many records
// are committed and how many were written in total.
func (cl *cluster) produce(t *testing.T, codec kgo.CompressionCodec, seed uint64) (committed, total int) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	plain := cl.client(t, kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := cl.client(t, kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(fmt.Sprintf("txn-%d", seed)))
	i := 0
	batch := func(n int) []*kgo.Record {
		rs := make([]*kgo.Record, n)
		for j := range rs {
			rs[j] = randomRecord(rng, i)
			i++
		}
		return rs
	}
	for round := range 4 {
		if err := plain.ProduceSync(ctx, batch(1+rng.IntN(40))...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		committed, total = committed+i-total, i
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.IntN(30)
		if err := txn.ProduceSync(ctx, batch(n)...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		commit := round%2 == 0
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		if commit {
			committed += n
		}
		total = i
	}
	return committed, total
}

// consume reads n records with franz-go's own consumer.
func (cl *cluster) consume(t *testing.T, n int, level kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	client := cl.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cl.topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(level))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := client.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll after %d of %d records: %v", len(out), n, err)
		}
		out = append(out, fs.Records()...)
	}
	if len(out) != n {
		t.Fatalf("consumed %d records, want %d", len(out), n)
	}
	return out
}

// fetchRaw issues one FetchRequest at offset and returns the partition.
func (cl *cluster) fetchRaw(t *testing.T, client *kgo.Client, offset int64, level int8, maxBytes int32) *kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	// Only the partition limit is small: kfake (at the pinned version)
	// leaves the aborted-transactions list out when the request-wide
	// MaxBytes cuts a fetch short.
	req.MaxBytes = 64 << 20
	req.IsolationLevel = level
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = cl.topic, cl.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, offset, maxBytes
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("unexpected fetch response shape: %+v", resp)
	}
	p := &resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch error code %d", p.ErrorCode)
	}
	return p
}

func toFetch(p *kmsg.FetchResponseTopicPartition, offset int64) Fetch {
	f := Fetch{Partition: p.Partition, FetchOffset: offset, RecordBatches: p.RecordBatches}
	for _, a := range p.AbortedTransactions {
		f.AbortedTransactions = append(f.AbortedTransactions, AbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	return f
}

func TestMatchesFranzGo(t *testing.T) {
	for ci, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			cl := newCluster(t, "orders-"+c.name)
			committed, total := cl.produce(t, c.codec, uint64(ci+1))
			for _, lv := range []struct {
				name  string
				kgo   kgo.IsolationLevel
				ours  Isolation
				level int8
				n     int
			}{
				{"read_committed", kgo.ReadCommitted(), ReadCommitted, 1, committed},
				{"read_uncommitted", kgo.ReadUncommitted(), ReadUncommitted, 0, total},
			} {
				t.Run(lv.name, func(t *testing.T) {
					want := cl.consume(t, lv.n, lv.kgo)
					// Small fetches force partial trailing batches and
					// several Appends; every other one copies its input.
					for _, maxBytes := range []int32{64 << 20, 3000} {
						t.Run(fmt.Sprint("max", maxBytes), func(t *testing.T) {
							checkDecode(t, cl, want, lv.ours, lv.level, maxBytes)
						})
					}
				})
			}
		})
	}
}

func checkDecode(t *testing.T, cl *cluster, want []*kgo.Record, iso Isolation, level int8, maxBytes int32) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dec, err := NewDecoder(mem, WithTopic(cl.topic), WithIsolation(iso))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Release()
	client := cl.client(t)
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var fetched [][]byte // UnsafeAppend: keep the bytes alive and unchanged
	offset, appends := int64(0), 0
	for dec.Len() < len(want) || offset == 0 {
		rp := cl.fetchRaw(t, client, offset, level, maxBytes)
		end := rp.HighWatermark
		if level == 1 {
			end = rp.LastStableOffset
		}
		if offset >= end {
			break
		}
		f := toFetch(rp, offset)
		var p Progress
		if appends%2 == 0 {
			p, err = dec.Append(f)
			clear(rp.RecordBatches) // Append must not have kept them
		} else {
			p, err = dec.UnsafeAppend(f)
			fetched = append(fetched, rp.RecordBatches)
		}
		appends++
		if err != nil {
			t.Fatal(err)
		}
		if p.Batches == 0 {
			t.Fatalf("no progress at offset %d (truncated=%v)", offset, p.Truncated)
		}
		if p.NextOffset <= offset {
			t.Fatalf("NextOffset %d did not advance from %d", p.NextOffset, offset)
		}
		offset = p.NextOffset
		if appends%3 == 0 { // several record batches per run
			r, err := dec.Flush()
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
	}
	r, err := dec.Flush()
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, r)
	if maxBytes < 1<<20 && appends < 2 {
		t.Fatalf("expected small fetches to take several rounds, took %d", appends)
	}
	i := 0
	for _, r := range recs {
		if !r.Schema().Equal(Schema(cl.topic, nil)) {
			t.Fatalf("schema %v", r.Schema())
		}
		compareRows(t, r, want, &i)
	}
	if i != len(want) {
		t.Fatalf("decoded %d rows, franz-go returned %d", i, len(want))
	}
	_ = fetched
}

func compareRows(t *testing.T, r arrow.RecordBatch, want []*kgo.Record, i *int) {
	t.Helper()
	part := r.Column(0).(*array.Int32)
	offs := r.Column(1).(*array.Int64)
	ts := r.Column(2).(*array.Timestamp)
	keys := r.Column(3).(*array.BinaryView)
	vals := r.Column(4).(*array.BinaryView)
	hdrs := r.Column(5).(*array.List)
	hs := hdrs.ListValues().(*array.Struct)
	hk := hs.Field(0).(*array.String)
	hv := hs.Field(1).(*array.Binary)
	for row := 0; row < int(r.NumRows()); row++ {
		if *i >= len(want) {
			t.Fatalf("more rows than franz-go records")
		}
		w := want[*i]
		*i++
		where := fmt.Sprintf("row %d (offset %d)", row, w.Offset)
		if part.Value(row) != w.Partition || offs.Value(row) != w.Offset {
			t.Fatalf("%s: partition/offset %d/%d, want %d/%d", where, part.Value(row), offs.Value(row), w.Partition, w.Offset)
		}
		if int64(ts.Value(row)) != w.Timestamp.UnixMilli() {
			t.Fatalf("%s: timestamp %d, want %d", where, ts.Value(row), w.Timestamp.UnixMilli())
		}
		checkBytes(t, where+" key", keys, row, w.Key)
		checkBytes(t, where+" value", vals, row, w.Value)
		start, end := hdrs.ValueOffsets(row)
		if int(end-start) != len(w.Headers) {
			t.Fatalf("%s: %d headers, want %d", where, end-start, len(w.Headers))
		}
		for j, h := range w.Headers {
			k := int(start) + j
			if hk.Value(k) != h.Key || hv.IsNull(k) != (h.Value == nil) || !bytes.Equal(hv.Value(k), h.Value) {
				t.Fatalf("%s: header %d = %q:%q, want %q:%q", where, j, hk.Value(k), hv.Value(k), h.Key, h.Value)
			}
		}
	}
}

func checkBytes(t *testing.T, where string, a *array.BinaryView, row int, want []byte) {
	t.Helper()
	if a.IsNull(row) != (want == nil) || !bytes.Equal(a.Value(row), want) {
		t.Fatalf("%s: got %q (null=%v), want %q (null=%v)", where, a.Value(row), a.IsNull(row), want, want == nil)
	}
}
