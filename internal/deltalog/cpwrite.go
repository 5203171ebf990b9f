package deltalog

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// cpBuilder appends checkpoint rows (one action each) straight to Arrow
// builders of checkpointSchema: no JSON round trip, so a checkpoint costs
// a few allocations per file, not kilobytes.
type cpBuilder struct {
	b                                     *array.RecordBuilder
	txn, add, remove, meta, proto, domain *array.StructBuilder
}

func newCPBuilder(mem memory.Allocator) *cpBuilder {
	b := array.NewRecordBuilder(mem, checkpointSchema)
	st := func(i int) *array.StructBuilder { return b.Field(i).(*array.StructBuilder) }
	return &cpBuilder{b: b, txn: st(0), add: st(1), remove: st(2), meta: st(3), proto: st(4), domain: st(5)}
}

func (c *cpBuilder) release() { c.b.Release() }

// rows returns the rows appended so far.
func (c *cpBuilder) rows() int { return c.b.Field(0).Len() }

// record returns the rows appended so far as a record and resets the
// builder (the caller releases the record).
func (c *cpBuilder) record() arrow.RecordBatch { return c.b.NewRecordBatch() }

func str(b array.Builder, s string) { b.(*array.StringBuilder).Append(s) }

func optStr(b array.Builder, s *string) {
	if s == nil {
		b.AppendNull()
		return
	}
	str(b, *s)
}

func optStrNonEmpty(b array.Builder, s string) {
	if s == "" {
		b.AppendNull()
		return
	}
	str(b, s)
}

func i64(b array.Builder, v int64) { b.(*array.Int64Builder).Append(v) }

func optI64(b array.Builder, v *int64) {
	if v == nil {
		b.AppendNull()
		return
	}
	i64(b, *v)
}

func boolean(b array.Builder, v bool) { b.(*array.BooleanBuilder).Append(v) }

// strMap appends m (nil: null) with its keys sorted.
func strMap(b array.Builder, m StrMap) {
	mb := b.(*array.MapBuilder)
	if m == nil {
		mb.AppendNull()
		return
	}
	mb.Append(true)
	for _, k := range sortedKeys(m) {
		str(mb.KeyBuilder(), k)
		str(mb.ItemBuilder(), m[k])
	}
}

// nullStrMap appends m (nil: null) with its keys sorted; nil values are
// null items.
func nullStrMap(b array.Builder, m NullStrMap) {
	mb := b.(*array.MapBuilder)
	if m == nil {
		mb.AppendNull()
		return
	}
	mb.Append(true)
	for _, k := range sortedKeys(m) {
		str(mb.KeyBuilder(), k)
		optStr(mb.ItemBuilder(), m[k])
	}
}

// strList appends l (nil: null).
func strList(b array.Builder, l []string) {
	lb := b.(*array.ListBuilder)
	if l == nil {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	for _, s := range l {
		str(lb.ValueBuilder(), s)
	}
}

// nonEmptyStrList appends l, or null when it is empty (omitempty).
func nonEmptyStrList(b array.Builder, l []string) {
	if len(l) == 0 {
		b.AppendNull()
		return
	}
	strList(b, l)
}

// append appends a as one row: its one set action in its column, null in
// the others. Actions a checkpoint does not hold (commitInfo, cdc) are
// ignored.
func (c *cpBuilder) append(a *Action) {
	set := func(sb *array.StructBuilder, on bool) {
		if on {
			sb.Append(true)
		} else {
			sb.AppendNull()
		}
	}
	if a.Txn == nil && a.Add == nil && a.Remove == nil && a.MetaData == nil && a.Protocol == nil && a.DomainMetadata == nil {
		return
	}
	set(c.txn, a.Txn != nil)
	if t := a.Txn; t != nil {
		str(c.txn.FieldBuilder(0), t.AppID)
		i64(c.txn.FieldBuilder(1), t.Version)
		optI64(c.txn.FieldBuilder(2), t.LastUpdated)
	}
	set(c.add, a.Add != nil)
	if f := a.Add; f != nil {
		str(c.add.FieldBuilder(0), f.Path)
		nullStrMap(c.add.FieldBuilder(1), f.PartitionValues)
		i64(c.add.FieldBuilder(2), f.Size)
		i64(c.add.FieldBuilder(3), f.ModificationTime)
		boolean(c.add.FieldBuilder(4), f.DataChange)
		optStrNonEmpty(c.add.FieldBuilder(5), f.Stats)
		if len(f.Tags) == 0 { // omitempty
			c.add.FieldBuilder(6).AppendNull()
		} else {
			strMap(c.add.FieldBuilder(6), f.Tags)
		}
	}
	set(c.remove, a.Remove != nil)
	if r := a.Remove; r != nil {
		str(c.remove.FieldBuilder(0), r.Path)
		optI64(c.remove.FieldBuilder(1), r.DeletionTimestamp)
		boolean(c.remove.FieldBuilder(2), r.DataChange)
		if r.ExtendedFileMetadata == nil {
			c.remove.FieldBuilder(3).AppendNull()
		} else {
			boolean(c.remove.FieldBuilder(3), *r.ExtendedFileMetadata)
		}
		if len(r.PartitionValues) == 0 { // omitempty
			c.remove.FieldBuilder(4).AppendNull()
		} else {
			nullStrMap(c.remove.FieldBuilder(4), r.PartitionValues)
		}
		optI64(c.remove.FieldBuilder(5), r.Size)
	}
	set(c.meta, a.MetaData != nil)
	if m := a.MetaData; m != nil {
		str(c.meta.FieldBuilder(0), m.ID)
		optStr(c.meta.FieldBuilder(1), m.Name)
		optStr(c.meta.FieldBuilder(2), m.Description)
		fb := c.meta.FieldBuilder(3).(*array.StructBuilder)
		fb.Append(true)
		str(fb.FieldBuilder(0), m.Format.Provider)
		strMap(fb.FieldBuilder(1), m.Format.Options)
		str(c.meta.FieldBuilder(4), m.SchemaString)
		strList(c.meta.FieldBuilder(5), m.PartitionColumns)
		strMap(c.meta.FieldBuilder(6), m.Configuration)
		optI64(c.meta.FieldBuilder(7), m.CreatedTime)
	}
	set(c.proto, a.Protocol != nil)
	if p := a.Protocol; p != nil {
		c.proto.FieldBuilder(0).(*array.Int32Builder).Append(int32(p.MinReaderVersion))
		c.proto.FieldBuilder(1).(*array.Int32Builder).Append(int32(p.MinWriterVersion))
		nonEmptyStrList(c.proto.FieldBuilder(2), p.ReaderFeatures)
		nonEmptyStrList(c.proto.FieldBuilder(3), p.WriterFeatures)
	}
	set(c.domain, a.DomainMetadata != nil)
	if d := a.DomainMetadata; d != nil {
		str(c.domain.FieldBuilder(0), d.Domain)
		str(c.domain.FieldBuilder(1), d.Configuration)
		boolean(c.domain.FieldBuilder(2), d.Removed)
	}
}
