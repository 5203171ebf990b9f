package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Realistic Kafka data for the kafkadecode benchmarks: "orders" JSON
// values of 100–1000 bytes (8 typed fields plus a free-text note), 16-byte
// keys, a trace header on every record, 500 records per batch.

const (
	benchBatches          = 20
	benchRecordsPerBatch  = 500
	benchRecords          = benchBatches * benchRecordsPerBatch
	benchBaseTimestamp    = 1_764_681_906_000
	benchCodecNone        = 0
	benchCodecGzip        = 1
	benchCodecSnappy      = 2
	benchCodecLz4         = 3
	benchCodecZstd        = 4
	benchOrdersJSONFields = 8
)

var statuses = []string{"NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"}

// orderJSON renders order i; the note pads values to 100–1000 bytes.
func orderJSON(rng *rand.Rand, i int) []byte {
	note := make([]byte, rng.IntN(850))
	for j := range note {
		note[j] = "abcdefghijklmnopqrstuvwxyz     "[rng.IntN(31)]
	}
	created := time.UnixMilli(benchBaseTimestamp + int64(i)*37).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	qty := 1 + rng.IntN(9)
	price := float64(rng.IntN(100000)) / 100
	return fmt.Appendf(nil, `{"order_id":%d,"customer_id":%d,"sku":"SKU-%06d","quantity":%d,"price":%.2f,"total":%.2f,"status":%q,"created_at":%q,"note":%q}`,
		1_000_000+i, rng.IntN(1_000_000), rng.IntN(1_000_000), qty, price, price*float64(qty), statuses[rng.IntN(len(statuses))], created, note)
}

// benchValues returns benchRecords order values.
func benchValues() [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	vs := make([][]byte, benchRecords)
	for i := range vs {
		vs[i] = orderJSON(rng, i)
	}
	return vs
}

func appendKafkaBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	return append(binary.AppendVarint(b, int64(len(v))), v...)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// kafkaBatches encodes values as magic v2 record batches with the codec,
// exactly as a broker would return them in a FetchResponse.
func kafkaBatches(values [][]byte, codec int16) []byte {
	var out []byte
	var zenc *zstd.Encoder
	if codec == benchCodecZstd {
		zenc, _ = zstd.NewWriter(nil)
		defer zenc.Close()
	}
	for bi := 0; bi*benchRecordsPerBatch < len(values); bi++ {
		vs := values[bi*benchRecordsPerBatch : min(len(values), (bi+1)*benchRecordsPerBatch)]
		var recs []byte
		for i, v := range vs {
			body := []byte{0}
			body = binary.AppendVarint(body, int64(i)*37)
			body = binary.AppendVarint(body, int64(i))
			body = appendKafkaBytes(body, fmt.Appendf(nil, "customer-%07d", (bi*benchRecordsPerBatch+i)%9_999_999))
			body = appendKafkaBytes(body, v)
			body = binary.AppendVarint(body, 1)
			body = appendKafkaBytes(body, []byte("traceparent"))
			body = appendKafkaBytes(body, []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
			recs = append(binary.AppendVarint(recs, int64(len(body))), body...)
		}
		switch codec {
		case benchCodecZstd:
			recs = zenc.EncodeAll(recs, nil)
		case benchCodecGzip:
			var buf bytes.Buffer
			w := gzip.NewWriter(&buf)
			w.Write(recs)
			w.Close()
			recs = buf.Bytes()
		case benchCodecSnappy:
			// A raw snappy block, as franz-go's producer writes it.
			recs = s2.EncodeSnappy(nil, recs)
		case benchCodecLz4:
			var buf bytes.Buffer
			w := lz4.NewWriter(&buf)
			w.Write(recs)
			w.Close()
			recs = buf.Bytes()
		}
		b := make([]byte, 61, 61+len(recs))
		binary.BigEndian.PutUint64(b[0:], uint64(bi*benchRecordsPerBatch))
		binary.BigEndian.PutUint32(b[8:], uint32(61-12+len(recs)))
		b[16] = 2
		binary.BigEndian.PutUint16(b[21:], uint16(codec))
		binary.BigEndian.PutUint32(b[23:], uint32(len(vs)-1))
		binary.BigEndian.PutUint64(b[27:], benchBaseTimestamp)
		binary.BigEndian.PutUint64(b[35:], uint64(benchBaseTimestamp+int64(len(vs)-1)*37))
		binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
		binary.BigEndian.PutUint16(b[51:], ^uint16(0))
		binary.BigEndian.PutUint32(b[53:], ^uint32(0))
		binary.BigEndian.PutUint32(b[57:], uint32(len(vs)))
		b = append(b, recs...)
		binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
		out = append(out, b...)
	}
	return out
}
