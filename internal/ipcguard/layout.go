package ipcguard

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Checker checks the messages of one IPC stream in order. Beyond what Check
// does for each message alone, it remembers the stream's schema and refuses
// a (record or dictionary) batch whose field nodes, buffers or variadic
// buffer counts are fewer than the schema's columns need.
//
// arrow-go's reader finds a missing node or buffer by panicking in the
// middle of a column, and recovers; the buffers it already decompressed for
// that column (and for earlier children of a struct or union) are then
// referenced by nothing and stay counted against the allocator forever, a
// leak a client can repeat at will. A missing variadic count is worse: the
// reader reads past the vector and sizes a slice from what it finds there.
// The walk below consumes nodes, buffers and counts exactly as arrow-go's
// loader does (ipc/file_reader.go, arrayLoaderContext), so nothing it
// accepts makes the loader run out.
type Checker struct {
	max    int64
	fields []field          // the schema's top-level fields; nil before a schema
	dicts  map[int64]*field // dictionary id -> its dictionary-encoded field
}

// NewChecker returns a Checker with bound max (as Check's).
func NewChecker(max int64) *Checker { return &Checker{max: max} }

// Check checks the next message of the stream: Check's rules, then, for a
// schema, that its fields can be read; for a batch, that the schema before
// it is known and the batch has what its columns need. It returns
// ErrMalformed (wrapped) for a refusal.
func (c *Checker) Check(header, body []byte) (Kind, error) {
	k, err := check(header, body, c.max)
	if err == nil {
		err = c.layout(k, header)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return k, nil
}

// Schema.fbs Type union.
const (
	typeNull            = 1
	typeInt             = 2
	typeFloatingPoint   = 3
	typeBinary          = 4
	typeUtf8            = 5
	typeBool            = 6
	typeDecimal         = 7
	typeDate            = 8
	typeTime            = 9
	typeTimestamp       = 10
	typeInterval        = 11
	typeList            = 12
	typeStruct          = 13
	typeUnion           = 14
	typeFixedSizeBinary = 15
	typeFixedSizeList   = 16
	typeMap             = 17
	typeDuration        = 18
	typeLargeBinary     = 19
	typeLargeUtf8       = 20
	typeLargeList       = 21
	typeRunEndEncoded   = 22
	typeBinaryView      = 23
	typeUtf8View        = 24
	typeListView        = 25
	typeLargeListView   = 26
)

// maxLoadDepth is arrow-go's kMaxNestingDepth: the loader refuses (by a
// panic, after allocating the parents' buffers) a child deeper than this.
const maxLoadDepth = 64

// field is what the loader needs to know of a schema field.
type field struct {
	typ      uint8
	dense    bool // a dense union
	dict     bool // dictionary-encoded: the batch holds its indices only
	children []field
}

// layout applies the stream-level rules to a message check accepted.
func (c *Checker) layout(k Kind, header []byte) error {
	fb := flatbuf(header)
	msg, _ := fb.root()
	hdr, _, _ := fb.tableField(msg, 2)
	version, _ := fb.int16Field(msg, 0, 0)
	switch k {
	case Schema:
		vec, n, _ := fb.vectorField(hdr, 1, 4)
		c.dicts = map[int64]*field{}
		fs, err := c.readFields(fb, vec, n)
		if err != nil {
			return fmt.Errorf("schema: %v", err)
		}
		c.fields = fs
		return nil
	case RecordBatch:
		if c.fields == nil {
			return errors.New("record batch before the schema")
		}
		w := walker{fb: fb, v5: version >= metadataV5}
		if err := w.start(hdr); err != nil {
			return err
		}
		for i := range c.fields {
			if err := w.walk(&c.fields[i], 0); err != nil {
				return fmt.Errorf("column %d: %v", i, err)
			}
		}
		return nil
	case DictionaryBatch:
		if c.fields == nil {
			return errors.New("dictionary batch before the schema")
		}
		id, _ := fb.int64Field(hdr, 0, 0)
		f, ok := c.dicts[id]
		if !ok {
			return fmt.Errorf("dictionary batch for id %d, which no schema field has", id)
		}
		data, _, _ := fb.tableField(hdr, 1)
		// arrow-go loads a dictionary with the metadata version unset,
		// that is with the pre-V5 rules (unions have a validity bitmap).
		w := walker{fb: fb, v5: false}
		if err := w.start(data); err != nil {
			return err
		}
		values := *f
		values.dict = false
		if err := w.walk(&values, 0); err != nil {
			return fmt.Errorf("dictionary %d: %v", id, err)
		}
		return nil
	}
	return nil
}

// readFields reads n Field tables from the vector at vec (check has bounded
// their number and depth), registering dictionary-encoded ones.
func (c *Checker) readFields(fb flatbuf, vec, n int) ([]field, error) {
	out := make([]field, n)
	for i := range n {
		p := vec + 4*i
		off, _ := fb.u32(p)
		t, err := fb.table(int64(p) + int64(off))
		if err != nil {
			return nil, err
		}
		f := &out[i]
		f.typ, _ = fb.uint8Field(t, 2, 0)
		if f.typ == typeUnion {
			if ut, ok, _ := fb.tableField(t, 3); ok {
				mode, _ := fb.int16Field(ut, 0, 0)
				f.dense = mode == 1
			}
		}
		children, nc, _ := fb.vectorField(t, 5, 4)
		if f.children, err = c.readFields(fb, children, nc); err != nil {
			return nil, err
		}
		if d, ok, _ := fb.tableField(t, 4); ok {
			f.dict = true
			id, _ := fb.int64Field(d, 0, 0)
			c.dicts[id] = f
		}
	}
	return out, nil
}

// walker consumes a batch's field nodes, buffers and variadic buffer counts
// as arrow-go's loader does.
type walker struct {
	fb                   flatbuf
	v5                   bool
	nodes, bufs, vars    int // positions of the vectors
	nNodes, nBufs, nVars int // their lengths
	inode, ibuf, ivar    int // consumed so far
}

func (w *walker) start(rb int) error {
	var err error
	if w.nodes, w.nNodes, err = w.fb.vectorField(rb, 1, 16); err != nil {
		return err
	}
	if w.bufs, w.nBufs, err = w.fb.vectorField(rb, 2, 16); err != nil {
		return err
	}
	w.vars, w.nVars, err = w.fb.vectorField(rb, 4, 8)
	return err
}

// node consumes a field node and returns its null count.
func (w *walker) node() (int64, error) {
	if w.inode >= w.nNodes {
		return 0, fmt.Errorf("the batch has %d field nodes, its schema needs more", w.nNodes)
	}
	p := w.nodes + 16*w.inode
	w.inode++
	return int64(binary.LittleEndian.Uint64(w.fb[p+8:])), nil
}

// buffers consumes n buffer slots.
func (w *walker) buffers(n int64) error {
	if n > int64(w.nBufs-w.ibuf) {
		return fmt.Errorf("the batch has %d buffers, its schema needs more", w.nBufs)
	}
	w.ibuf += int(n)
	return nil
}

// validity consumes the validity bitmap slot of a field of type typ, where
// the metadata version gives it one.
func (w *walker) validity(typ uint8) error {
	if typ == typeNull || w.v5 && (typ == typeUnion || typ == typeRunEndEncoded) {
		return nil
	}
	return w.buffers(1)
}

func (w *walker) walk(f *field, depth int) error {
	if depth > maxLoadDepth {
		return fmt.Errorf("nested deeper than %d", maxLoadDepth)
	}
	if f.dict { // the indices: an integer column
		if _, err := w.node(); err != nil {
			return err
		}
		return w.buffers(2)
	}
	var extra int64 // buffers after the validity bitmap
	nested := false
	switch f.typ {
	case typeNull:
		_, err := w.node()
		return err
	case typeInt, typeFloatingPoint, typeBool, typeDecimal, typeDate, typeTime,
		typeTimestamp, typeInterval, typeDuration, typeFixedSizeBinary:
		extra = 1
	case typeBinary, typeUtf8, typeLargeBinary, typeLargeUtf8:
		extra = 2
	case typeBinaryView, typeUtf8View:
		if w.ivar >= w.nVars {
			return fmt.Errorf("the batch has %d variadic buffer counts, its schema needs more", w.nVars)
		}
		// check has bounded each count by the number of buffers.
		extra = 1 + int64(binary.LittleEndian.Uint64(w.fb[w.vars+8*w.ivar:]))
		w.ivar++
	case typeList, typeLargeList, typeMap:
		extra, nested = 1, true
	case typeListView, typeLargeListView:
		extra, nested = 2, true
	case typeFixedSizeList, typeStruct, typeRunEndEncoded:
		nested = true
	case typeUnion:
		extra, nested = 1, true
		if f.dense {
			extra = 2
		}
	default:
		return fmt.Errorf("field type %d is not one this reader knows", f.typ)
	}
	nulls, err := w.node()
	if err != nil {
		return err
	}
	if f.typ == typeUnion && !w.v5 && nulls != 0 {
		return errors.New("a union with a validity bitmap (pre-1.0 metadata), which is not read")
	}
	if err := w.validity(f.typ); err != nil {
		return err
	}
	if err := w.buffers(extra); err != nil {
		return err
	}
	if !nested {
		return nil // the loader reads no children of a flat type
	}
	for i := range f.children {
		if err := w.walk(&f.children[i], depth+1); err != nil {
			return err
		}
	}
	return nil
}
