package kafkadecode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/pierrec/lz4/v4"
)

// The frame decoder reads what the lz4 package writes, with every block
// size, block checksums, content size and checksum, incompressible blocks
// (stored raw) and several frames back to back; and rejects truncations.
func TestLz4Frames(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	var plain []byte
	for i := range 40_000 {
		plain = fmt.Appendf(plain, `{"order_id":%d,"customer":"customer-%d","pad":"%x"}`, i, i%977, rng.Uint32())
	}
	noise := make([]byte, 300<<10)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	plain = append(plain, noise...)
	compress := func(opts ...lz4.Option) []byte {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(opts...); err != nil {
			t.Fatal(err)
		}
		w.Write(plain)
		w.Close()
		return buf.Bytes()
	}
	cases := map[string][]byte{
		"default":             compress(),
		"64k+block checksums": compress(lz4.BlockSizeOption(lz4.Block64Kb), lz4.BlockChecksumOption(true)),
		"256k, no content checksum, size": compress(lz4.BlockSizeOption(lz4.Block256Kb), lz4.ChecksumOption(false),
			lz4.SizeOption(uint64(len(plain)))),
		"1m": compress(lz4.BlockSizeOption(lz4.Block1Mb)),
	}
	two := append(compress(lz4.BlockSizeOption(lz4.Block64Kb)), compress(lz4.BlockSizeOption(lz4.Block64Kb))...)
	r := newRecycler(mem, 0)
	for name, src := range cases {
		d := decompressor{max: DefaultMaxDecompressedBytes}
		a := arena{r: r}
		if err := d.lz4Frames(src, &a, 0); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(a.buf, plain) {
			t.Fatalf("%s: %d bytes decoded, want the %d written", name, len(a.buf), len(plain))
		}
		a.free()
		for _, cut := range []int{3, 6, len(src) / 2, len(src) - 1} {
			a := arena{r: r}
			if err := d.lz4Frames(src[:cut], &a, 0); err == nil {
				t.Fatalf("%s truncated at %d: no error", name, cut)
			}
			a.free()
		}
	}
	d := decompressor{max: DefaultMaxDecompressedBytes}
	a := arena{r: r}
	if err := d.lz4Frames(two, &a, 0); err != nil || !bytes.Equal(a.buf, append(append([]byte(nil), plain...), plain...)) {
		t.Fatalf("two frames: %v, %d bytes", err, len(a.buf))
	}
	a.free()
	small := decompressor{max: 1 << 20}
	a = arena{r: r}
	if err := small.lz4Frames(cases["default"], &a, 0); err != errMaxDecompress {
		t.Fatalf("over the maximum: %v", err)
	}
	a.free()
	r.close()
}
