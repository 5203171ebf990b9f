package kafkadecode

import (
	"encoding/binary"
	"errors"

	"github.com/pierrec/lz4/v4"
)

// The LZ4 frame format (lz4_Frame_format.md, v1.6), as Kafka wraps each
// record batch's records. Frames are decoded here block by block, straight
// into the arena: lz4.Reader would take a block-sized buffer (4 MiB for
// the default block size) from a sync.Pool for every frame, decompress
// into it and copy out, so every partition's decoder held a 4 MiB buffer
// on and off, a swing of the live heap of several such buffers. Checksums
// (header, block, content) are not verified: the record batch's CRC32C,
// checked before decompression, already covers the compressed bytes.

const (
	lz4Magic         = 0x184D2204
	lz4FlagBlockSum  = 1 << 4
	lz4FlagSize      = 1 << 3
	lz4FlagSum       = 1 << 2
	lz4FlagDictID    = 1 << 0
	lz4FlagIndep     = 1 << 5
	lz4Uncompressed  = 1 << 31
	lz4MaxBlockIndex = 7
)

var errLz4Frame = errors.New("malformed lz4 frame")

// lz4Frames appends the decompressed content of the LZ4 frames in src to
// a.buf.
func (d *decompressor) lz4Frames(src []byte, a *arena, start int) error {
	for len(src) > 0 {
		if len(src) < 7 || binary.LittleEndian.Uint32(src) != lz4Magic {
			return errLz4Frame
		}
		flg, bd := src[4], src[5]
		if flg>>6 != 1 {
			return errLz4Frame // version must be 01
		}
		bi := int(bd>>4) & 7
		if bi < 4 || bi > lz4MaxBlockIndex {
			return errLz4Frame
		}
		blockMax := 1 << (8 + 2*bi) // 64 KiB, 256 KiB, 1 MiB, 4 MiB
		hdr := 7                    // magic, FLG, BD, HC
		if flg&lz4FlagSize != 0 {
			if len(src) < hdr+8 {
				return errLz4Frame
			}
			if size := binary.LittleEndian.Uint64(src[6:]); size <= uint64(d.max) {
				a.reserve(int(size))
			}
			hdr += 8
		}
		if flg&lz4FlagDictID != 0 {
			hdr += 4
		}
		if len(src) < hdr {
			return errLz4Frame
		}
		src = src[hdr:]
		frameStart := len(a.buf)
		for {
			if len(src) < 4 {
				return errLz4Frame
			}
			size := binary.LittleEndian.Uint32(src)
			src = src[4:]
			if size == 0 {
				break // end mark
			}
			n := int(size &^ lz4Uncompressed)
			if n > len(src) || n > blockMax {
				return errLz4Frame
			}
			block := src[:n]
			src = src[n:]
			if flg&lz4FlagBlockSum != 0 {
				if len(src) < 4 {
					return errLz4Frame
				}
				src = src[4:]
			}
			if size&lz4Uncompressed != 0 {
				a.reserve(n)
				a.buf = append(a.buf, block...)
			} else if err := d.lz4Block(block, a, frameStart, flg&lz4FlagIndep == 0, blockMax); err != nil {
				return err
			}
			if len(a.buf)-start > d.max {
				return errMaxDecompress
			}
		}
		if flg&lz4FlagSum != 0 {
			if len(src) < 4 {
				return errLz4Frame
			}
			src = src[4:]
		}
	}
	return nil
}

// lz4Block decompresses one block to the end of a.buf. It first tries the
// room the arena has (up to the frame's block size), and grows the arena
// only if that was short: reserving a guess of the block's size up front
// grew an arena sized from the previous Append (a whole fetch) at its
// last block, copying it whole, where the block would have fit. A
// dependent block may refer to up to 64 KiB of the frame's output before
// it.
func (d *decompressor) lz4Block(block []byte, a *arena, frameStart int, linked bool, blockMax int) error {
	guess := min(blockMax, cap(a.buf)-len(a.buf))
	if guess < len(block) {
		guess = min(blockMax, max(64<<10, 8*len(block)))
	}
	for {
		a.reserve(guess)
		dst := a.buf[len(a.buf) : len(a.buf)+guess]
		var (
			n   int
			err error
		)
		if linked && len(a.buf) > frameStart {
			dict := a.buf[max(frameStart, len(a.buf)-64<<10):]
			n, err = lz4.UncompressBlockWithDict(block, dst, dict)
		} else {
			n, err = lz4.UncompressBlock(block, dst)
		}
		if err == nil {
			a.buf = a.buf[:len(a.buf)+n]
			return nil
		}
		if guess >= blockMax {
			return err
		}
		guess = blockMax
	}
}
