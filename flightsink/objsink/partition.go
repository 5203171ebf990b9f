package objsink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/flightline/flightline"
)

// HiveNull is the directory value of a null partition value, as Hive and
// Spark write it.
const HiveNull = "__HIVE_DEFAULT_PARTITION__"

// maxPartitionValue bounds a partition value's escaped length in bytes.
const maxPartitionValue = 200

// encoded is one part file's bytes and its partition directory.
type encoded struct {
	dir  string
	data []byte
}

// encodeParts splits rec by the partition column (when there is one) and
// encodes each part. Nothing is written.
func (s *Sink) encodeParts(ctx context.Context, rec arrow.RecordBatch) ([]encoded, error) {
	if s.o.partition == "" {
		data, err := s.encode(rec)
		if err != nil {
			return nil, err
		}
		return []encoded{{data: data}}, nil
	}
	keys, err := s.partitionKeys(rec)
	if err != nil {
		return nil, err
	}
	var order []string
	rows := map[string][]int{}
	for i, k := range keys {
		if _, ok := rows[k]; !ok {
			order = append(order, k)
		}
		rows[k] = append(rows[k], i)
	}
	if len(order) == 1 {
		data, err := s.encode(rec)
		if err != nil {
			return nil, err
		}
		return []encoded{{dir: order[0], data: data}}, nil
	}
	out := make([]encoded, 0, len(order))
	for _, k := range order {
		mb := array.NewBooleanBuilder(s.o.mem)
		mask := make([]bool, len(keys))
		for _, i := range rows[k] {
			mask[i] = true
		}
		mb.AppendValues(mask, nil)
		m := mb.NewBooleanArray()
		mb.Release()
		sub, err := compute.FilterRecordBatch(compute.WithAllocator(ctx, s.o.mem), rec, m, compute.DefaultFilterOptions())
		m.Release()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: partitioning: %v", flightline.ErrInternal, s.name, err)
		}
		data, err := s.encode(sub)
		sub.Release()
		if err != nil {
			return nil, err
		}
		out = append(out, encoded{dir: k, data: data})
	}
	return out, nil
}

// partitionKeys returns the partition directory of every row of rec.
func (s *Sink) partitionKeys(rec arrow.RecordBatch) ([]string, error) {
	idx := rec.Schema().FieldIndices(s.o.partition)
	if len(idx) != 1 {
		return nil, fmt.Errorf("%w: %s: the partition column %q is not in the batch (schema %s)", flightline.ErrSchemaMismatch, s.name, s.o.partition, rec.Schema())
	}
	col := rec.Column(idx[0])
	name := escape(s.o.partition)
	keys := make([]string, col.Len())
	if s.o.byDay {
		day, err := dayOf(col)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: partition_by_day=%s: %v", flightline.ErrSchemaMismatch, s.name, s.o.partition, err)
		}
		for i := range keys {
			v := HiveNull
			if col.IsValid(i) {
				v = day(i).Format(time.DateOnly)
			}
			keys[i] = name + "_day=" + v
		}
		return keys, nil
	}
	for i := range keys {
		v := HiveNull
		if col.IsValid(i) {
			v = escape(col.ValueStr(i))
			if len(v) > maxPartitionValue {
				return nil, fmt.Errorf("%w: %s: a value of the partition column %q is %d bytes escaped; at most %d make a directory name", flightline.ErrInvalidInput, s.name, s.o.partition, len(v), maxPartitionValue)
			}
		}
		keys[i] = name + "=" + v
	}
	return keys, nil
}

// dayOf returns the UTC time of a row of a timestamp or date column.
func dayOf(col arrow.Array) (func(i int) time.Time, error) {
	switch c := col.(type) {
	case *array.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		return func(i int) time.Time { return c.Value(i).ToTime(unit).UTC() }, nil
	case *array.Date32:
		return func(i int) time.Time { return c.Value(i).ToTime().UTC() }, nil
	case *array.Date64:
		return func(i int) time.Time { return c.Value(i).ToTime().UTC() }, nil
	}
	return nil, fmt.Errorf("want a timestamp or date column, it is %s", col.DataType())
}

// escape escapes s for a Hive partition directory name: %XX for every
// byte outside A-Z a-z 0-9 . _ -, and a leading '.' or '_' (which readers
// would skip).
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' ||
			(i > 0 && (c == '.' || c == '_'))
		if ok {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() == 0 {
		return HiveNull
	}
	return b.String()
}
