package kafkadecode

import (
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
