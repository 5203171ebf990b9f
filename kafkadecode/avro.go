package kafkadecode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/hamba/avro/v2"
)

// Errors of Avro value decoding.
var (
	// ErrAvroData means the bytes do not decode with the writer schema.
	ErrAvroData = errors.New("kafkadecode: malformed Avro data")
	// ErrAvroIncompatible means a writer schema cannot be read into the
	// reader schema (a field changed to an incompatible type).
	ErrAvroIncompatible = errors.New("kafkadecode: Avro writer schema incompatible with reader schema")
	// ErrWireFormat means a value lacks the Confluent wire-format header.
	ErrWireFormat = errors.New("kafkadecode: value is not in Confluent wire format")
)

// AvroError reports where an Avro value failed to decode.
type AvroError struct {
	Field  string // innermost field involved
	Offset int    // byte offset in the Avro payload
	Err    error
}

func (e *AvroError) Error() string {
	return fmt.Sprintf("kafkadecode: Avro field %q at byte %d: %v", e.Field, e.Offset, e.Err)
}

// Unwrap returns the cause (wrapping ErrAvroData or ErrAvroIncompatible).
func (e *AvroError) Unwrap() error { return e.Err }

// AvroOption configures an AvroDecoder.
type AvroOption func(*avroConfig)

type avroConfig struct {
	confluent bool
	registry  *Registry
	timeout   time.Duration
}

// AvroConfluent expects every value in the Confluent wire format: a zero
// magic byte and a big-endian 4-byte schema id before the Avro payload.
// Without a registry the payload is read with the reader schema whatever
// the id.
func AvroConfluent() AvroOption { return func(c *avroConfig) { c.confluent = true } }

// AvroRegistry looks writer schemas up by id in r (implies AvroConfluent)
// and reads them into the reader schema, matching record fields by name:
// writer fields the reader lacks are skipped; reader fields the writer
// lacks become null when nullable, else take their default (primitive
// defaults only), and without either the writer schema is incompatible;
// int→long, int/long→double and float→double are promoted. A lookup blocks the Append that meets a new id for at most
// timeout (0 means 10s); a failed lookup stops Append with an error for
// which IsRetryable is true, while an unknown id dead-letters the record.
func AvroRegistry(r *Registry, timeout time.Duration) AvroOption {
	return func(c *avroConfig) { c.confluent, c.registry, c.timeout = true, r, timeout }
}

// AvroDecoder decodes Avro binary values into a struct column, with a
// decoder compiled from the schemas and appending straight into the column
// builders (no intermediate Go values). hamba/avro parses the schemas.
// It is not safe for concurrent use.
type AvroDecoder struct {
	reader avro.Schema
	typ    *arrow.StructType
	cfg    avroConfig
	bound  *array.StructBuilder
	prog   *anode            // reader schema as writer schema
	byID   map[uint32]*anode // compiled per writer schema id (registry)
	badIDs map[uint32]error  // ids whose schema cannot be read
	r      areader
}

// NewAvroDecoder returns a decoder whose output type is derived from the
// Avro record schema readerSchema (see SchemaFromAvro).
func NewAvroDecoder(readerSchema string, opts ...AvroOption) (*AvroDecoder, error) {
	s, err := parseAvro(readerSchema)
	if err != nil {
		return nil, err
	}
	st, err := avroRecordType(s)
	if err != nil {
		return nil, err
	}
	var cfg avroConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.timeout < 0 {
		return nil, fmt.Errorf("%w: negative registry timeout", ErrInvalidOption)
	}
	if cfg.timeout == 0 {
		cfg.timeout = 10 * time.Second
	}
	return &AvroDecoder{reader: s, typ: st, cfg: cfg, byID: map[uint32]*anode{}, badIDs: map[uint32]error{}}, nil
}

// Type returns the struct type of the value column.
func (d *AvroDecoder) Type() *arrow.StructType { return d.typ }

// AppendValue decodes one Avro value into a new row of b (see ValueDecoder).
func (d *AvroDecoder) AppendValue(b *array.StructBuilder, value []byte) error {
	if b != d.bound {
		if !arrow.TypeEqual(b.Type(), d.typ) {
			b.AppendNull()
			return fmt.Errorf("%w: builder type %s, decoder type %s", ErrInvalidOption, b.Type(), d.typ)
		}
		prog, err := compileAvro(d.reader, d.reader, b, "")
		if err != nil { // the reader schema was validated by NewAvroDecoder
			b.AppendNull()
			return err
		}
		d.bound, d.prog = b, prog
		clear(d.byID)
		clear(d.badIDs)
	}
	prog := d.prog
	if d.cfg.confluent {
		if len(value) < 5 || value[0] != 0 {
			b.AppendNull()
			return ErrWireFormat
		}
		id := binary.BigEndian.Uint32(value[1:5])
		value = value[5:]
		if d.cfg.registry != nil {
			var err error
			if prog, err = d.program(id, b); err != nil {
				b.AppendNull()
				return err
			}
		}
	}
	if b.Len() == 0 {
		prog.reserve()
	}
	d.r = areader{b: value}
	defer func() { d.r.b = nil }() // do not keep the value's buffer alive
	if err := d.r.decode(prog); err != nil {
		return err
	}
	if d.r.i != len(value) {
		return &AvroError{Offset: d.r.i, Err: fmt.Errorf("%w: %d bytes after the record", ErrAvroData, len(value)-d.r.i)}
	}
	return nil
}

// program returns the compiled reader for writer schema id.
func (d *AvroDecoder) program(id uint32, b *array.StructBuilder) (*anode, error) {
	if p, ok := d.byID[id]; ok {
		return p, nil
	}
	if err, ok := d.badIDs[id]; ok {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.timeout)
	defer cancel()
	text, err := d.cfg.registry.Schema(ctx, id)
	if err != nil {
		if !IsRetryable(err) {
			d.badIDs[id] = err
		}
		return nil, err
	}
	ws, err := parseAvro(text)
	if err == nil {
		var p *anode
		if p, err = compileAvro(ws, d.reader, b, ""); err == nil {
			if len(d.byID) >= 1024 { // bound the cache; ids are few in practice
				clear(d.byID)
			}
			d.byID[id] = p
			return p, nil
		}
	}
	err = fmt.Errorf("schema id %d: %w", id, err)
	d.badIDs[id] = err
	return nil, err
}
