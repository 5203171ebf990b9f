package kafkadecode

import (
	"encoding/binary"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Parallel decompression (WithDecompressConcurrency). An Append's
// batches are claimed in order by up to n goroutines, the caller's
// included, each of which checks a batch's CRC and decompresses it into
// its own arena; the caller decodes the records of every batch in order,
// as soon as that batch is ready, and while it does the other goroutines
// decompress the batches after it. Only the decompression moves: what
// batches are skipped, which error is reported and how far Progress goes
// are decided in the ordered pass, exactly as without it, so the output is
// the same. Memory is what the serial path holds too (every decompressed
// batch of the Append, until the record batch is released), in n arenas
// instead of one; a batch's decompressed size stays bounded by
// WithMaxDecompressedBytes before it is allocated.
//
// An arena grows while the caller reads batches already in it, so a
// worker arena never frees the buffer it outgrows before the Append ends
// (arena.keep): a batch's bytes, as published, stay valid, and the same
// bytes sit at the same offset of the arena's final buffer, which the
// views reference.

// worker is one goroutine's decompression state, kept across Appends.
// Worker 0 is the caller's.
type worker struct {
	dz    decompressor
	arena arena
	idx   int32 // data-buffer slot of the arena in this Append, or -1
}

// prepared is one complete batch of the Append and, once done, what its
// goroutine found.
type prepared struct {
	pos    int  // of the batch in the fetch
	total  int  // its length
	unpack bool // compressed and not skipped by offset: decompress it
	done   bool // guarded by par.mu

	crcOK bool   // CRC checked and matching (or not checked)
	w     int    // worker whose arena holds it
	start int    // its offset in that arena
	end   int    // and end
	bytes []byte // arena bytes [start, end) as published
	err   error  // decompression error
}

// par is the state of one Append's parallel pass.
type par struct {
	raw  []byte
	prep []prepared
	next atomic.Int64 // next batch to claim
	stop atomic.Bool  // the Append returned: claim no more
	wg   sync.WaitGroup
	mu   sync.Mutex
	cond sync.Cond
}

// prepare starts the parallel pass over f when it holds at least two
// compressed batches to decompress, and returns its batches in order (nil
// when it did not start). It lists the batches up to the first whose
// header the ordered pass will reject or find truncated.
func (d *Decoder) prepare(f *Fetch) []prepared {
	n := d.cfg.decompressConcurrency
	if n < 2 {
		return nil
	}
	raw := f.RecordBatches
	pp := &d.par
	pp.prep = pp.prep[:0]
	compressed := 0
	for pos := 0; pos < len(raw); {
		rest := raw[pos:]
		if len(rest) < batchHeaderLen || int8(rest[offMagic]) != 2 {
			break
		}
		length := int32(binary.BigEndian.Uint32(rest[offBatchLength:]))
		if length < batchHeaderLen-logOverhead || logOverhead+int(length) > len(rest) {
			break
		}
		total := logOverhead + int(length)
		h := readBatchHeader(rest)
		// Batches the ordered pass skips before decompressing are not
		// decompressed: those below the fetch offset (control batches
		// are read whatever their offset).
		unpack := h.attributes&attrCodecMask != codecNone && (h.lastOffset >= f.FetchOffset || h.attributes&attrControl != 0)
		if unpack {
			compressed++
		}
		pp.prep = append(pp.prep, prepared{pos: pos, total: total, unpack: unpack})
		pos += total
	}
	if compressed < 2 {
		return nil
	}
	n = min(n, compressed)
	d.rec.setSpares(n)
	for len(d.workers) < n {
		d.workers = append(d.workers, &worker{
			dz:    decompressor{max: d.cfg.maxDecompressed, verify: d.cfg.skipCRC},
			arena: arena{r: d.rec, keep: true}, idx: -1,
		})
	}
	pp.raw = raw
	pp.next.Store(0)
	pp.stop.Store(false)
	pp.cond.L = &pp.mu
	for w := 1; w < n; w++ {
		pp.wg.Add(1)
		go func() {
			defer pp.wg.Done()
			for !pp.stop.Load() {
				i := int(pp.next.Add(1) - 1)
				if i >= len(pp.prep) {
					return
				}
				d.unpack(w, i)
			}
		}()
	}
	return pp.prep
}

// unpack checks the CRC of batch i and decompresses it on worker w, then
// marks it done.
func (d *Decoder) unpack(w, i int) {
	pp := &d.par
	p := &pp.prep[i]
	batch := pp.raw[p.pos : p.pos+p.total]
	p.crcOK = d.cfg.skipCRC || crc32.Checksum(batch[offAttributes:], castagnoli) == binary.BigEndian.Uint32(batch[offCRC:])
	if p.crcOK && p.unpack {
		wk := d.workers[w]
		codec := int(binary.BigEndian.Uint16(batch[offAttributes:]) & attrCodecMask)
		p.w = w
		p.start, p.err = wk.dz.decompress(codec, batch[batchHeaderLen:], &wk.arena)
		if p.err == nil {
			p.end = len(wk.arena.buf)
			p.bytes = wk.arena.buf[p.start:p.end:p.end]
		}
	} else {
		p.unpack = false
	}
	pp.mu.Lock()
	p.done = true
	pp.cond.Broadcast()
	pp.mu.Unlock()
}

// await returns once batch i is done. While it is not, the caller
// decompresses the next unclaimed batch itself (on worker 0), or waits
// when none is left.
func (d *Decoder) await(i int) {
	pp := &d.par
	for {
		pp.mu.Lock()
		done := pp.prep[i].done
		pp.mu.Unlock()
		if done {
			return
		}
		if j := int(pp.next.Add(1) - 1); j < len(pp.prep) {
			d.unpack(0, j)
			continue
		}
		pp.mu.Lock()
		for !pp.prep[i].done {
			pp.cond.Wait()
		}
		pp.mu.Unlock()
		return
	}
}

// preparedBytes returns the decompressed bytes of p and the data-buffer
// slot of the arena holding them, reserving it on first use.
func (d *Decoder) preparedBytes(p *prepared) ([]byte, int32) {
	wk := d.workers[p.w]
	if wk.idx < 0 {
		wk.idx = d.reserveDataBuf()
	}
	return p.bytes, wk.idx
}

// finishWorkers stops the pass, waits for its goroutines, puts the worker
// arenas that rows reference into their slots and frees the others.
func (d *Decoder) finishWorkers() {
	d.par.stop.Store(true)
	d.par.wg.Wait()
	clear(d.par.prep) // drop the published slices
	d.par.raw = nil
	// Batches go to whichever goroutine is free, so a worker's share
	// varies from Append to Append: size every arena for the largest share
	// of this one and a quarter more, and never below the last size (a
	// spare arena serves only a request it fits), so that the next
	// Append rarely grows one or allocates afresh. The size is bounded by
	// the largest fetch.
	most := 0
	for _, wk := range d.workers {
		most = max(most, len(wk.arena.buf))
	}
	for _, wk := range d.workers {
		prev := wk.arena.hint // take resets it
		wk.arena.freeKept()
		if wk.idx >= 0 {
			b := wk.arena.take()
			if b == nil {
				b = memory.NewBufferBytes(nil)
			}
			d.dataBufs[wk.idx] = b
		} else {
			wk.arena.free()
		}
		wk.idx = -1
		if most > 0 {
			wk.arena.hint = max(prev, most+most/4)
		}
	}
}

func (d *Decoder) releaseWorkers() {
	d.par.stop.Store(true)
	d.par.wg.Wait()
	for _, wk := range d.workers {
		wk.arena.freeKept()
		wk.arena.free()
		wk.dz.close()
	}
	d.workers = nil
}
