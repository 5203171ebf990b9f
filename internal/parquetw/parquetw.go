// Package parquetw writes Arrow record batches as Parquet files with the
// settings Flightline's lake sinks (Delta, S3) share, and computes the
// per-column statistics Delta's add actions carry.
//
// Settings: snappy compression (Compression: another codec); dictionary encoding only for columns whose
// sampled cardinality makes it pay (pqarrow's default of dictionary on every
// column is several times slower on high-cardinality columns and gains
// nothing there); timestamps stored as microseconds (the unit Delta
// readers expect; nanoseconds are truncated); Parquet format 2.6; Parquet
// column statistics on.
//
// Columns are encoded in parallel (Parallelism, default GOMAXPROCS) when
// the batch has rows and more than one top-level column, none of them
// nested, and fits one row group; the bytes written are the same as the serial
// encoding's, byte for byte, whatever the parallelism (the S3 sink's
// replay-overwrite relies on that). Each column's pages, its last one
// included, are compressed by the goroutine that encodes it; dictionary
// pages and the copy into w stay serial, in column order.
//
// Write does not retain rec. The allocator is a parameter (nil: Go
// allocator); everything allocated from it is released before Write
// returns.
package parquetw

import (
	"bytes"
	"fmt"
	"io"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/flightline/flightline"
)

// Option configures Write.
type Option func(*config)

type config struct {
	mem        memory.Allocator
	workers    int
	dictionary int // 0 auto, 1 always, -1 never
	rowGroup   int64
	createdBy  string
	keepUnit   bool
	codec      compress.Compression
	level      int
}

// Allocator sets the allocator Parquet buffers come from.
func Allocator(mem memory.Allocator) Option { return func(c *config) { c.mem = mem } }

// DictionaryAlways turns dictionary encoding on for every column, as
// pqarrow does by default (for comparison benchmarks).
func DictionaryAlways() Option { return func(c *config) { c.dictionary = 1 } }

// DictionaryNever turns dictionary encoding off for every column.
func DictionaryNever() Option { return func(c *config) { c.dictionary = -1 } }

// DictionaryMode returns the option for a dictionary mode named as the
// sinks' public options name it: "auto" (the default), "always" or "never".
func DictionaryMode(mode string) (Option, error) {
	switch mode {
	case "auto":
		return func(c *config) { c.dictionary = 0 }, nil
	case "always":
		return DictionaryAlways(), nil
	case "never":
		return DictionaryNever(), nil
	}
	return nil, fmt.Errorf("%w: Parquet dictionary mode %q: want auto, always or never", flightline.ErrInvalidInput, mode)
}

// KeepTimestampUnit writes timestamps in their own unit (seconds and
// milliseconds as milliseconds, microseconds and nanoseconds as they are)
// instead of coercing them to microseconds, for readers that keep
// nanoseconds (Snowflake). Nothing is truncated.
func KeepTimestampUnit() Option { return func(c *config) { c.keepUnit = true } }

// MaxRowGroupRows bounds the rows per row group (default 1M).
func MaxRowGroupRows(n int64) Option { return func(c *config) { c.rowGroup = n } }

// Parallelism sets how many columns are encoded at once (default
// GOMAXPROCS; 1 or less: one column after another). It does not change the
// bytes written.
func Parallelism(n int) Option { return func(c *config) { c.workers = n } }

// Compression sets the codec and its level (compress.DefaultCompressionLevel:
// the codec's own default) instead of snappy, for tables that name theirs
// (Iceberg's write.parquet.compression-codec and -level).
func Compression(codec compress.Compression, level int) Option {
	return func(c *config) { c.codec, c.level = codec, level }
}

// CreatedBy sets the created_by string of the file.
func CreatedBy(s string) Option { return func(c *config) { c.createdBy = s } }

// ColumnStats are the statistics of one top-level column.
type ColumnStats struct {
	Name      string
	Type      arrow.DataType
	NullCount int64
	// HasMinMax is false for types without an order Delta uses (booleans,
	// binary, nested types) and for all-null columns.
	HasMinMax bool
	// Min and Max are int64 (integers, dates as days, timestamps in the
	// column's unit), float64 (floats, NaN ignored), string, or
	// decimal128.Num.
	Min, Max any
}

// Stats are the statistics of one written file.
type Stats struct {
	NumRecords int64
	Columns    []ColumnStats
}

// Write writes rec as one Parquet file to w and returns its statistics.
func Write(w io.Writer, rec arrow.RecordBatch, opts ...Option) (Stats, error) {
	c := config{mem: memory.DefaultAllocator, rowGroup: 1 << 20, createdBy: "flightline", workers: runtime.GOMAXPROCS(0),
		codec: compress.Codecs.Snappy, level: compress.DefaultCompressionLevel}
	for _, o := range opts {
		o(&c)
	}
	if c.mem == nil {
		c.mem = memory.DefaultAllocator
	}
	props := []parquet.WriterProperty{
		parquet.WithAllocator(c.mem),
		parquet.WithCompression(c.codec),
		parquet.WithCompressionLevel(c.level),
		parquet.WithMaxRowGroupLength(c.rowGroup),
		parquet.WithCreatedBy(c.createdBy),
		parquet.WithStats(true),
		parquet.WithVersion(parquet.V2_6),
		parquet.WithDictionaryDefault(c.dictionary > 0),
	}
	if c.dictionary == 0 {
		for i, f := range rec.Schema().Fields() {
			if DictionaryPays(rec.Column(i)) {
				props = append(props, parquet.WithDictionaryFor(f.Name, true))
			}
		}
	}
	aopts := []pqarrow.WriterOption{pqarrow.WithAllocator(c.mem)}
	if !c.keepUnit {
		aopts = append(aopts, pqarrow.WithCoerceTimestamps(arrow.Microsecond), pqarrow.WithTruncatedTimestamps(true))
	}
	aprops := pqarrow.NewArrowWriterProperties(aopts...)
	wprops := parquet.NewWriterProperties(props...)
	if c.workers > 1 && rec.NumCols() > 1 && rec.NumRows() > 0 && rec.NumRows() <= c.rowGroup && flat(rec.Schema()) {
		return writeParallel(w, rec, wprops, aprops, c.workers)
	}
	fw, err := pqarrow.NewFileWriter(rec.Schema(), w, wprops, aprops)
	if err != nil {
		return Stats{}, fmt.Errorf("parquetw: %w", err)
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return Stats{}, fmt.Errorf("parquetw: %w", err)
	}
	if err := fw.Close(); err != nil {
		return Stats{}, fmt.Errorf("parquetw: %w", err)
	}
	return Compute(rec), nil
}

// Bytes is Write into a new buffer.
func Bytes(rec arrow.RecordBatch, opts ...Option) ([]byte, Stats, error) {
	var buf bytes.Buffer
	buf.Grow(int(estimate(rec)))
	st, err := Write(&buf, rec, opts...)
	return buf.Bytes(), st, err
}

func estimate(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
	}
	return n/2 + 4096
}

const sampleRows = 4096

// DictionaryPays reports whether dictionary encoding is worth it for col,
// judged on a sample of its first rows: strings and binaries need at most
// one distinct value per 2 rows, fixed-width numbers one per 8. Booleans and
// nested columns never use it.
func DictionaryPays(col arrow.Array) bool {
	n := min(col.Len(), sampleRows)
	if n == 0 {
		return false
	}
	switch a := col.(type) {
	case *array.String:
		return distinct(n, n/2, func(i int) string { return a.Value(i) }, a) <= n/2
	case *array.LargeString:
		return distinct(n, n/2, func(i int) string { return a.Value(i) }, a) <= n/2
	case *array.Binary:
		return distinct(n, n/2, func(i int) string { return string(a.Value(i)) }, a) <= n/2
	case *array.Int64:
		return distinct(n, n/8, a.Value, a) <= n/8
	case *array.Int32:
		return distinct(n, n/8, a.Value, a) <= n/8
	case *array.Float64:
		return distinct(n, n/8, a.Value, a) <= n/8
	case *array.Float32:
		return distinct(n, n/8, a.Value, a) <= n/8
	case *array.Int16:
		return distinct(n, n/8, a.Value, a) <= n/8
	case *array.Int8:
		return distinct(n, n/8, a.Value, a) <= n/8
	case *array.Date32:
		return distinct(n, n/8, a.Value, a) <= n/8
	case *array.Timestamp:
		return distinct(n, n/8, a.Value, a) <= n/8
	}
	return false
}

// distinct counts the distinct valid values among the first n rows of a,
// stopping once the count exceeds limit: a high-cardinality column (ids,
// offsets, timestamps) is decided after limit+1 values instead of n.
func distinct[T comparable](n, limit int, v func(int) T, a arrow.Array) int {
	seen := make(map[T]struct{}, min(limit+1, 64))
	for i := range n {
		if a.IsValid(i) {
			seen[v(i)] = struct{}{}
			if len(seen) > limit {
				break
			}
		}
	}
	return len(seen)
}

// Compute returns the statistics of rec without writing it.
func Compute(rec arrow.RecordBatch) Stats {
	st := Stats{NumRecords: rec.NumRows(), Columns: make([]ColumnStats, rec.NumCols())}
	for i, f := range rec.Schema().Fields() {
		col := rec.Column(i)
		cs := ColumnStats{Name: f.Name, Type: f.Type, NullCount: int64(col.NullN())}
		if col.NullN() < col.Len() {
			cs.Min, cs.Max, cs.HasMinMax = minMax(col)
		}
		st.Columns[i] = cs
	}
	return st
}

type ordered interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~float32 | ~float64 | ~string
}

func mm[T ordered](a arrow.Array, v func(int) T) (T, T) {
	var lo, hi T
	first := true
	for i := range a.Len() {
		if a.IsNull(i) {
			continue
		}
		x := v(i)
		if x != x { // NaN never bounds
			continue
		}
		if first {
			lo, hi, first = x, x, false
			continue
		}
		if x < lo {
			lo = x
		}
		if x > hi {
			hi = x
		}
	}
	return lo, hi
}

// mmValues is mm over a fixed-width column's value slice: without nulls
// it reads the slice directly instead of asking every row for its
// validity (a tenth or more of an encode's time went to this scan).
func mmValues[T ordered](a arrow.Array, vals []T) (T, T) {
	if a.NullN() > 0 {
		return mm(a, func(i int) T { return vals[i] })
	}
	var lo, hi T
	first := true
	for _, x := range vals {
		if x != x { // NaN never bounds
			continue
		}
		if first {
			lo, hi, first = x, x, false
			continue
		}
		if x < lo {
			lo = x
		} else if x > hi {
			hi = x
		}
	}
	return lo, hi
}

func ints[T ~int8 | ~int16 | ~int32 | ~int64](a arrow.Array, vals []T) (any, any, bool) {
	lo, hi := mmValues(a, vals)
	return int64(lo), int64(hi), true
}

func minMax(col arrow.Array) (any, any, bool) {
	switch a := col.(type) {
	case *array.Int8:
		return ints(a, a.Int8Values())
	case *array.Int16:
		return ints(a, a.Int16Values())
	case *array.Int32:
		return ints(a, a.Int32Values())
	case *array.Int64:
		return ints(a, a.Int64Values())
	case *array.Date32:
		return ints(a, a.Date32Values())
	case *array.Timestamp:
		return ints(a, a.TimestampValues())
	case *array.Float32:
		lo, hi := mmValues(a, a.Float32Values())
		if lo != lo || hi != hi || (lo == 0 && hi == 0 && allNaN(a)) {
			return nil, nil, false
		}
		return float64(lo), float64(hi), true
	case *array.Float64:
		lo, hi := mmValues(a, a.Float64Values())
		if lo == 0 && hi == 0 && allNaN(a) {
			return nil, nil, false
		}
		return lo, hi, true
	case *array.String:
		lo, hi := mm(a, a.Value)
		return lo, hi, true
	case *array.LargeString:
		lo, hi := mm(a, a.Value)
		return lo, hi, true
	case *array.Decimal128:
		var lo, hi decimal128.Num
		first := true
		for i := range a.Len() {
			if a.IsNull(i) {
				continue
			}
			x := a.Value(i)
			if first {
				lo, hi, first = x, x, false
				continue
			}
			if x.Less(lo) {
				lo = x
			}
			if hi.Less(x) {
				hi = x
			}
		}
		return lo, hi, true
	}
	return nil, nil, false
}

func allNaN(a arrow.Array) bool {
	for i := range a.Len() {
		if a.IsNull(i) {
			continue
		}
		var x float64
		switch v := a.(type) {
		case *array.Float32:
			x = float64(v.Value(i))
		case *array.Float64:
			x = v.Value(i)
		}
		if x == x {
			return false
		}
	}
	return true
}
