package kafkadecode

import (
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/hamba/avro/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"
)

// Decoding must not allocate per record: the allocations of an Append +
// Flush cycle are per call (arrays, buffers), so they must not grow with
// the number of records.
func TestAllocsPerRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are meaningless under -short race builds")
	}
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	for _, tc := range []struct {
		name     string
		compress func([]byte) []byte
		attrs    int16
	}{
		{"none", nil, 0},
		{"zstd", func(b []byte) []byte { return enc.EncodeAll(b, nil) }, codecZstd},
		{"snappy", xerial, codecSnappy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			count := func(n int) float64 {
				raw := tbatch{attrs: tc.attrs, recs: sampleRecs(n), compress: tc.compress}.build()
				dec, err := NewDecoder(mem, WithCapacityHint(16))
				if err != nil {
					t.Fatal(err)
				}
				defer dec.Release()
				cycle := func() {
					if _, err := dec.UnsafeAppend(Fetch{RecordBatches: raw}); err != nil {
						t.Fatal(err)
					}
					rec, err := dec.Flush()
					if err != nil {
						t.Fatal(err)
					}
					rec.Release()
				}
				cycle() // warm up: size buffers, create codec state
				return testing.AllocsPerRun(20, cycle)
			}
			small, large := count(10), count(2000)
			if perRecord := (large - small) / 1990; perRecord > 0.01 {
				t.Fatalf("%.3f allocations per record (%v for 10 records, %v for 2000)", perRecord, small, large)
			}
			t.Logf("%v allocations per Append+Flush, independent of record count", large)
		})
	}
}

// Value decoders allocate nothing per record once builders are sized.
func TestValueDecoderAllocs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	jd := orderDecoder(t)
	jb := array.NewStructBuilder(mem, jd.Type())
	defer jb.Release()
	js := []byte(`{"id": 7, "customer": "bob \u00e9", "total": 12.5, "price": "3.10", "created": "2026-12-02T13:25:06.5Z", "items": [{"sku": "a", "qty": 1}], "addr": {"city": "x"}, "skip": [1, 2]}`)
	ad, err := NewAvroDecoder(avroOrderSchema)
	if err != nil {
		t.Fatal(err)
	}
	ab := array.NewStructBuilder(mem, ad.Type())
	defer ab.Release()
	av, err := avro.Marshal(avro.MustParse(avroOrderSchema), sampleAvroOrder(4))
	if err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func(){
		"json": func() {
			if err := jd.AppendValue(jb, js); err != nil {
				t.Fatal(err)
			}
		},
		"avro": func() {
			if err := ad.AppendValue(ab, av); err != nil {
				t.Fatal(err)
			}
		},
	} {
		for range 5000 { // grow the builders first
			run()
		}
		if a := testing.AllocsPerRun(1000, run); a > 0.01 {
			t.Fatalf("%s: %.2f allocations per value", name, a)
		}
	}
	jb.NewArray().Release()
	ab.NewArray().Release()
}
