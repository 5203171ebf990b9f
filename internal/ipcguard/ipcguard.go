// Package ipcguard checks the metadata of an Arrow IPC message received from
// a client before arrow-go's IPC reader sees it, and bounds every allocation
// the message can make the reader do.
//
// arrow-go's reader trusts the flatbuffer metadata: it allocates the
// uncompressed length a compressed buffer declares before decompressing it
// (a 1 TiB declaration is a fatal out-of-memory, which no recover catches),
// and it does not compare the declared body length or metadata version with
// what was received. Check parses the metadata itself, with every read
// bounds-checked, so a hostile header is an error here and never a panic.
//
// Check does not validate the array contents (offsets, bitmaps, child
// lengths): that is array.ValidateRecordFull's job once the batch is
// decoded, which is safe because every buffer then lies inside the body.
package ipcguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// ErrMalformed is wrapped by every error Check returns.
var ErrMalformed = errors.New("malformed IPC message")

// Metadata versions (Schema.fbs MetadataVersion) this guard accepts: V4
// (Arrow 0.8 to 0.17) and V5 (Arrow 1.0 and later). arrow-go reads nothing
// older.
const (
	metadataV4 = 3
	metadataV5 = 4
)

// Message header types (Message.fbs MessageHeader).
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
)

// Compression codecs and methods (Message.fbs).
const (
	codecLZ4Frame = 0
	codecZSTD     = 1
	methodBuffer  = 0
)

// Kind is the kind of message Check accepted.
type Kind int

// Message kinds.
const (
	Schema Kind = iota + 1
	DictionaryBatch
	RecordBatch
)

// Check verifies the IPC message of one FlightData: header is its
// data_header (a flatbuffer Message), body its data_body. max bounds what
// the message may make the reader allocate: the sum of the uncompressed
// lengths its compressed buffers declare, and its row and node counts,
// which must fit in max bytes at one bit per value.
//
// It returns ErrMalformed (wrapped, with the rule broken) for a metadata
// version other than V4 or V5, a body length other than len(body), a header
// type other than schema, dictionary batch or record batch, a buffer outside
// the body, negative lengths or counts, an unknown compression codec or
// method, a compressed buffer too short for its length prefix, or declared
// sizes over max.
func Check(header, body []byte, max int64) (Kind, error) {
	k, err := check(header, body, max)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return k, nil
}

func check(header, body []byte, max int64) (Kind, error) {
	fb := flatbuf(header)
	msg, err := fb.root()
	if err != nil {
		return 0, fmt.Errorf("message: %v", err)
	}
	version, err := fb.int16Field(msg, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("message version: %v", err)
	}
	if version != metadataV4 && version != metadataV5 {
		return 0, fmt.Errorf("metadata version %d is not %d (V4) or %d (V5)", version, metadataV4, metadataV5)
	}
	htype, err := fb.uint8Field(msg, 1, 0)
	if err != nil {
		return 0, fmt.Errorf("message header type: %v", err)
	}
	bodyLen, err := fb.int64Field(msg, 3, 0)
	if err != nil {
		return 0, fmt.Errorf("message body length: %v", err)
	}
	if bodyLen != int64(len(body)) {
		return 0, fmt.Errorf("message declares a body of %d bytes, %d were received", bodyLen, len(body))
	}
	hdr, ok, err := fb.tableField(msg, 2)
	if err != nil {
		return 0, fmt.Errorf("message header: %v", err)
	}
	if !ok {
		return 0, errors.New("message has no header")
	}
	if _, _, err := fb.vectorField(msg, 4, 4); err != nil {
		return 0, fmt.Errorf("message custom metadata: %v", err)
	}
	switch htype {
	case headerSchema:
		if len(body) != 0 {
			return 0, fmt.Errorf("schema message with a body of %d bytes", len(body))
		}
		if err := fb.checkSchema(hdr); err != nil {
			return 0, fmt.Errorf("schema: %v", err)
		}
		return Schema, nil
	case headerRecordBatch:
		return RecordBatch, fb.checkRecordBatch(hdr, body, max)
	case headerDictionaryBatch:
		data, ok, err := fb.tableField(hdr, 1)
		if err != nil {
			return 0, fmt.Errorf("dictionary batch data: %v", err)
		}
		if !ok {
			return 0, errors.New("dictionary batch without data")
		}
		if err := fb.checkRecordBatch(data, body, max); err != nil {
			return 0, fmt.Errorf("dictionary batch: %v", err)
		}
		return DictionaryBatch, nil
	}
	return 0, fmt.Errorf("message header type %d is not a schema, dictionary batch or record batch", htype)
}

// maxDepth bounds the nesting of schema fields, as arrow-go's reader does.
const maxDepth = 64

// checkSchema checks that every vector of the Schema table at sc (fields,
// their children, names, custom metadata, union type ids) fits in the
// header: arrow-go's reader sizes slices from these lengths before reading
// them, so a field count of 2^31 in a 100-byte header is a fatal
// out-of-memory, not an error.
func (fb flatbuf) checkSchema(sc int) error {
	fields, n, err := fb.vectorField(sc, 1, 4)
	if err != nil {
		return fmt.Errorf("fields: %v", err)
	}
	if _, _, err := fb.vectorField(sc, 2, 4); err != nil {
		return fmt.Errorf("custom metadata: %v", err)
	}
	if _, _, err := fb.vectorField(sc, 3, 8); err != nil {
		return fmt.Errorf("features: %v", err)
	}
	// Every field of a well-formed schema has its own 4-byte slot in some
	// vector; a header that reuses tables (a field that is its own child)
	// would make any reader's walk exponential.
	budget := len(fb) / 4
	return fb.checkFields(fields, n, 0, &budget)
}

// checkFields checks n Field tables whose offsets start at vec.
func (fb flatbuf) checkFields(vec, n, depth int, budget *int) error {
	if depth > maxDepth {
		return fmt.Errorf("fields nested deeper than %d", maxDepth)
	}
	for i := range n {
		if *budget--; *budget < 0 {
			return errors.New("more fields than the header has room for (shared tables)")
		}
		p := vec + 4*i
		off, _ := fb.u32(p)
		f, err := fb.table(int64(p) + int64(off))
		if err != nil {
			return fmt.Errorf("field %d: %v", i, err)
		}
		if _, _, err := fb.vectorField(f, 0, 1); err != nil {
			return fmt.Errorf("field %d name: %v", i, err)
		}
		if _, _, err := fb.vectorField(f, 6, 4); err != nil {
			return fmt.Errorf("field %d custom metadata: %v", i, err)
		}
		if t, ok, err := fb.tableField(f, 3); err != nil {
			return fmt.Errorf("field %d type: %v", i, err)
		} else if ok {
			// Only Union (type 14) has a vector: its type ids.
			if tt, _ := fb.uint8Field(f, 2, 0); tt == 14 {
				if _, _, err := fb.vectorField(t, 1, 4); err != nil {
					return fmt.Errorf("field %d union type ids: %v", i, err)
				}
			}
		}
		children, nc, err := fb.vectorField(f, 5, 4)
		if err != nil {
			return fmt.Errorf("field %d children: %v", i, err)
		}
		if err := fb.checkFields(children, nc, depth+1, budget); err != nil {
			return fmt.Errorf("field %d: %v", i, err)
		}
	}
	return nil
}

// checkRecordBatch checks the RecordBatch table at rb against body.
func (fb flatbuf) checkRecordBatch(rb int, body []byte, max int64) error {
	// One bit per value is the least any non-null layout needs; a count
	// beyond that cannot describe a batch of at most max bytes.
	maxValues := max
	if maxValues < math.MaxInt64/8 {
		maxValues *= 8
	}
	rows, err := fb.int64Field(rb, 0, 0)
	if err != nil {
		return fmt.Errorf("record batch length: %v", err)
	}
	if rows < 0 || rows > maxValues {
		return fmt.Errorf("record batch length %d is out of range [0, %d]", rows, maxValues)
	}
	nodes, n, err := fb.vectorField(rb, 1, 16)
	if err != nil {
		return fmt.Errorf("record batch nodes: %v", err)
	}
	for i := range n {
		p := nodes + 16*i
		length := int64(binary.LittleEndian.Uint64(fb[p:]))
		nulls := int64(binary.LittleEndian.Uint64(fb[p+8:]))
		if length < 0 || length > maxValues {
			return fmt.Errorf("field node %d: length %d is out of range [0, %d]", i, length, maxValues)
		}
		if nulls < 0 || nulls > length {
			return fmt.Errorf("field node %d: null count %d is out of range [0, %d]", i, nulls, length)
		}
	}
	bufs, nb, err := fb.vectorField(rb, 2, 16)
	if err != nil {
		return fmt.Errorf("record batch buffers: %v", err)
	}
	comp, compressed, err := fb.tableField(rb, 3)
	if err != nil {
		return fmt.Errorf("record batch compression: %v", err)
	}
	var codec uint8
	if compressed {
		codec, err = fb.uint8Field(comp, 0, codecLZ4Frame)
		if err != nil {
			return fmt.Errorf("compression codec: %v", err)
		}
		if codec != codecLZ4Frame && codec != codecZSTD {
			return fmt.Errorf("compression codec %d is not LZ4_FRAME or ZSTD", codec)
		}
		method, err := fb.uint8Field(comp, 1, methodBuffer)
		if err != nil {
			return fmt.Errorf("compression method: %v", err)
		}
		if method != methodBuffer {
			return fmt.Errorf("compression method %d is not BUFFER", method)
		}
	}
	var declared int64 // uncompressed bytes the reader will allocate
	for i := range nb {
		p := bufs + 16*i
		off := int64(binary.LittleEndian.Uint64(fb[p:]))
		length := int64(binary.LittleEndian.Uint64(fb[p+8:]))
		if off < 0 || length < 0 || off > int64(len(body)) || length > int64(len(body))-off {
			return fmt.Errorf("buffer %d (offset %d, length %d) lies outside the %d-byte body", i, off, length, len(body))
		}
		if !compressed || length == 0 {
			continue
		}
		if length < 8 {
			return fmt.Errorf("compressed buffer %d is %d bytes, too short for its 8-byte length prefix", i, length)
		}
		size := int64(binary.LittleEndian.Uint64(body[off:]))
		if size == -1 {
			continue // stored uncompressed: a slice of the body
		}
		if size < 0 || size > max-declared {
			return fmt.Errorf("compressed buffer %d declares %d uncompressed bytes; the batch may not exceed %d", i, size, max)
		}
		declared += size
		if err := checkCompressed(codec, body[off+8:off+length], size); err != nil {
			return fmt.Errorf("compressed buffer %d: %v", i, err)
		}
	}
	vc, nv, err := fb.vectorField(rb, 4, 8)
	if err != nil {
		return fmt.Errorf("record batch variadic buffer counts: %v", err)
	}
	if nv > nb {
		return fmt.Errorf("%d variadic buffer counts for %d buffers", nv, nb)
	}
	// arrow-go sizes a column's buffer list from its count: each must be
	// among the buffers the message has.
	for i := range nv {
		if c := int64(binary.LittleEndian.Uint64(fb[vc+8*i:])); c < 0 || c > int64(nb) {
			return fmt.Errorf("variadic buffer count %d is %d; the batch has %d buffers", i, c, nb)
		}
	}
	return nil
}

// flatbuf reads a flatbuffer with every access bounds-checked.
type flatbuf []byte

var errBounds = errors.New("offset out of bounds")

func (fb flatbuf) u32(p int) (uint32, error) {
	if p < 0 || p > len(fb)-4 {
		return 0, errBounds
	}
	return binary.LittleEndian.Uint32(fb[p:]), nil
}

func (fb flatbuf) u16(p int) (uint16, error) {
	if p < 0 || p > len(fb)-2 {
		return 0, errBounds
	}
	return binary.LittleEndian.Uint16(fb[p:]), nil
}

// root returns the position of the root table.
func (fb flatbuf) root() (int, error) {
	off, err := fb.u32(0)
	if err != nil {
		return 0, err
	}
	return fb.table(int64(off))
}

// table checks that a table starts at t and its vtable is in bounds.
func (fb flatbuf) table(t int64) (int, error) {
	if t < 0 || t > int64(len(fb))-4 {
		return 0, errBounds
	}
	soff, _ := fb.u32(int(t))
	vt := t - int64(int32(soff))
	if vt < 0 || vt > int64(len(fb))-4 {
		return 0, errors.New("vtable out of bounds")
	}
	size, _ := fb.u16(int(vt))
	if size < 4 || size%2 != 0 || int64(size) > int64(len(fb))-vt {
		return 0, fmt.Errorf("vtable of %d bytes does not fit", size)
	}
	return int(t), nil
}

// field returns the position of field i of table t, or 0 when absent.
func (fb flatbuf) field(t, i int, width int) (int, error) {
	soff, _ := fb.u32(t)
	vt := int(int64(t) - int64(int32(soff)))
	size, _ := fb.u16(vt)
	slot := 4 + 2*i
	if slot+2 > int(size) {
		return 0, nil
	}
	off, _ := fb.u16(vt + slot)
	if off == 0 {
		return 0, nil
	}
	p := t + int(off)
	if p > len(fb)-width {
		return 0, errBounds
	}
	return p, nil
}

func (fb flatbuf) uint8Field(t, i int, def uint8) (uint8, error) {
	p, err := fb.field(t, i, 1)
	if err != nil || p == 0 {
		return def, err
	}
	return fb[p], nil
}

func (fb flatbuf) int16Field(t, i int, def int16) (int16, error) {
	p, err := fb.field(t, i, 2)
	if err != nil || p == 0 {
		return def, err
	}
	return int16(binary.LittleEndian.Uint16(fb[p:])), nil
}

func (fb flatbuf) int64Field(t, i int, def int64) (int64, error) {
	p, err := fb.field(t, i, 8)
	if err != nil || p == 0 {
		return def, err
	}
	return int64(binary.LittleEndian.Uint64(fb[p:])), nil
}

// tableField returns the position of the table field i of t points to.
func (fb flatbuf) tableField(t, i int) (int, bool, error) {
	p, err := fb.field(t, i, 4)
	if err != nil || p == 0 {
		return 0, false, err
	}
	off, _ := fb.u32(p)
	sub, err := fb.table(int64(p) + int64(off))
	return sub, err == nil, err
}

// vectorField returns the position of the first element and the length of
// the vector of elem-byte elements field i of t points to; (0, 0) when
// absent.
func (fb flatbuf) vectorField(t, i, elem int) (int, int, error) {
	p, err := fb.field(t, i, 4)
	if err != nil || p == 0 {
		return 0, 0, err
	}
	off, _ := fb.u32(p)
	v := int64(p) + int64(off)
	n, err := fb.u32(int(min(v, math.MaxInt32)))
	if err != nil {
		return 0, 0, err
	}
	start := v + 4
	if int64(n) > (int64(len(fb))-start)/int64(elem) {
		return 0, 0, fmt.Errorf("vector of %d %d-byte elements does not fit", n, elem)
	}
	return int(start), int(n), nil
}

// Layout says where the fields of a (dictionary or record) batch message
// sit in its header, as byte positions, so that tests and fuzz seeds can
// build malformed messages from valid ones. A position of 0 means the field
// is absent (it has its default value).
type Layout struct {
	Version    int   // int16
	BodyLength int   // int64
	Length     int   // int64: the batch's row count
	Nodes      []int // FieldNode structs: length int64 at +0, null count int64 at +8
	Buffers    []int // Buffer structs: offset int64 at +0, length int64 at +8
	Compressed bool
}

// Locate returns the Layout of a batch message header.
func Locate(header []byte) (Layout, error) {
	fb := flatbuf(header)
	var l Layout
	msg, err := fb.root()
	if err != nil {
		return l, err
	}
	if l.Version, err = fb.field(msg, 0, 2); err != nil {
		return l, err
	}
	if l.BodyLength, err = fb.field(msg, 3, 8); err != nil {
		return l, err
	}
	htype, err := fb.uint8Field(msg, 1, 0)
	if err != nil {
		return l, err
	}
	rb, ok, err := fb.tableField(msg, 2)
	if err != nil || !ok {
		return l, fmt.Errorf("no header: %v", err)
	}
	switch htype {
	case headerDictionaryBatch:
		if rb, ok, err = fb.tableField(rb, 1); err != nil || !ok {
			return l, fmt.Errorf("no dictionary data: %v", err)
		}
	case headerRecordBatch:
	default:
		return l, fmt.Errorf("header type %d is not a batch", htype)
	}
	if l.Length, err = fb.field(rb, 0, 8); err != nil {
		return l, err
	}
	nodes, n, err := fb.vectorField(rb, 1, 16)
	if err != nil {
		return l, err
	}
	for i := range n {
		l.Nodes = append(l.Nodes, nodes+16*i)
	}
	bufs, n, err := fb.vectorField(rb, 2, 16)
	if err != nil {
		return l, err
	}
	for i := range n {
		l.Buffers = append(l.Buffers, bufs+16*i)
	}
	_, l.Compressed, err = fb.tableField(rb, 3)
	return l, err
}

// Stream wraps a Flight data stream so that every message with an IPC
// header is checked by a Checker (bound max) before the reader reading from
// the Stream sees it. The first refusal ends the stream: Recv returns it,
// and Err keeps it, because arrow-go's reader reports a Recv error as an
// unclassified one of its own.
type Stream struct {
	flight.DataStreamReader
	guard *Checker
	err   error
}

// NewStream returns r guarded with bound max.
func NewStream(r flight.DataStreamReader, max int64) *Stream {
	return &Stream{DataStreamReader: r, guard: NewChecker(max)}
}

// Recv implements flight.DataStreamReader.
func (s *Stream) Recv() (*flight.FlightData, error) {
	if s.err != nil {
		return nil, s.err
	}
	fd, err := s.DataStreamReader.Recv()
	if err != nil {
		return nil, err
	}
	if len(fd.DataHeader) > 0 {
		if _, err := s.guard.Check(fd.DataHeader, fd.DataBody); err != nil {
			s.err = err
			return nil, err
		}
	}
	return fd, nil
}

// Err returns the message refusal that ended the stream, if any.
func (s *Stream) Err() error { return s.err }

// LocateSchemaFields returns the byte position, in a schema message header,
// of the length (uint32) of the schema's fields vector, for building
// malformed schemas in tests.
func LocateSchemaFields(header []byte) (int, error) {
	fb := flatbuf(header)
	msg, err := fb.root()
	if err != nil {
		return 0, err
	}
	sc, ok, err := fb.tableField(msg, 2)
	if err != nil || !ok {
		return 0, fmt.Errorf("no header: %v", err)
	}
	p, err := fb.field(sc, 1, 4)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("no fields: %v", err)
	}
	off, _ := fb.u32(p)
	return p + int(off), nil
}
