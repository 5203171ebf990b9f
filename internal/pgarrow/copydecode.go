package pgarrow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// copySignature opens every binary COPY stream.
var copySignature = []byte("PGCOPY\n\xff\r\n\x00")

// ErrCopyStream is wrapped by the errors of a CopyDecoder whose input is
// not a well-formed binary COPY stream (as opposed to a value its Decoder
// refuses).
var ErrCopyStream = errors.New("pgarrow: malformed binary COPY stream")

// CopyDecoder decodes the output of COPY … TO STDOUT (FORMAT binary) straight
// into Arrow builders: the i-th column of each tuple goes through decs[i]
// into b.Field(i). It is an io.Writer, so it can be given to
// pgconn.CopyTo, which writes each CopyData message as it arrives.
//
// Write never keeps p: a tuple split across writes is copied into an
// internal buffer until its rest arrives, and a tuple is appended to the
// builders only once it is whole. A value that its Decoder refuses (a
// *ColumnError) leaves that row's earlier columns appended: after any
// error, discard the builders. Not safe for concurrent use. The builders
// stay owned by the caller; the decoder holds no Arrow memory.
type CopyDecoder struct {
	fields  []array.Builder
	decs    []Decoder
	header  bool // the header was read
	done    bool // the trailer was read
	rows    int
	pending []byte // the start of a tuple (or header) split across writes
}

// NewCopyDecoder returns a decoder into the first len(decs) fields of b.
func NewCopyDecoder(b *array.RecordBuilder, decs []Decoder) *CopyDecoder {
	fields := make([]array.Builder, len(decs))
	for i := range decs {
		fields[i] = b.Field(i)
	}
	return &CopyDecoder{fields: fields, decs: decs}
}

// Rows returns the tuples appended so far.
func (d *CopyDecoder) Rows() int { return d.rows }

// Write decodes the whole tuples of pending+p into the builders and keeps
// the rest. It returns len(p) or an error (ErrCopyStream, or a value a
// Decoder refused).
func (d *CopyDecoder) Write(p []byte) (int, error) {
	if len(d.pending) == 0 {
		n, err := d.decode(p)
		if err != nil {
			return 0, err
		}
		d.pending = append(d.pending, p[n:]...)
		return len(p), nil
	}
	d.pending = append(d.pending, p...)
	n, err := d.decode(d.pending)
	if err != nil {
		return 0, err
	}
	d.pending = d.pending[:copy(d.pending, d.pending[n:])]
	return len(p), nil
}

// Finish reports whether the stream ended as it should: the header, whole
// tuples, then the trailer and nothing after it.
func (d *CopyDecoder) Finish() error {
	if !d.done || len(d.pending) > 0 {
		return fmt.Errorf("%w: truncated (%d tuples read, %d bytes left over)", ErrCopyStream, d.rows, len(d.pending))
	}
	return nil
}

// decode consumes whole items (the header, tuples, the trailer) from the
// start of p and returns how many bytes it consumed.
func (d *CopyDecoder) decode(p []byte) (int, error) {
	be := binary.BigEndian
	off := 0
	if !d.header {
		if len(p) < len(copySignature)+8 {
			return 0, nil
		}
		if !bytes.Equal(p[:len(copySignature)], copySignature) {
			return 0, fmt.Errorf("%w: bad signature", ErrCopyStream)
		}
		flags := be.Uint32(p[len(copySignature):])
		if flags&(1<<16) != 0 {
			return 0, fmt.Errorf("%w: OIDs included", ErrCopyStream)
		}
		ext := int(be.Uint32(p[len(copySignature)+4:]))
		off = len(copySignature) + 8 + ext
		if off > len(p) {
			return 0, nil
		}
		d.header = true
	}
	nf := len(d.decs)
	for off < len(p) {
		if d.done {
			return 0, fmt.Errorf("%w: data after the trailer", ErrCopyStream)
		}
		if len(p)-off < 2 {
			return off, nil
		}
		cnt := int16(be.Uint16(p[off:]))
		if cnt == -1 {
			d.done = true
			off += 2
			continue
		}
		if int(cnt) != nf {
			return 0, fmt.Errorf("%w: a tuple of %d columns, want %d", ErrCopyStream, cnt, nf)
		}
		// First see that the tuple is whole, then append it.
		end := off + 2
		for range nf {
			if len(p)-end < 4 {
				return off, nil
			}
			l := int32(be.Uint32(p[end:]))
			end += 4
			if l > 0 {
				if int(l) > len(p)-end {
					return off, nil
				}
				end += int(l)
			} else if l < -1 {
				return 0, fmt.Errorf("%w: value length %d", ErrCopyStream, l)
			}
		}
		at := off + 2
		for i, dec := range d.decs {
			l := int32(be.Uint32(p[at:]))
			at += 4
			var v []byte
			if l >= 0 {
				v = p[at : at+int(l) : at+int(l)]
				at += int(l)
			}
			if err := dec(d.fields[i], v); err != nil {
				return 0, &ColumnError{Column: i, Err: err}
			}
		}
		d.rows++
		off = end
	}
	return off, nil
}

// ColumnError is a value of column Column that its Decoder refused.
type ColumnError struct {
	Column int
	Err    error
}

func (e *ColumnError) Error() string { return fmt.Sprintf("column %d: %v", e.Column, e.Err) }

func (e *ColumnError) Unwrap() error { return e.Err }
