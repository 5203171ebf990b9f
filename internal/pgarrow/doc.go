// Package pgarrow is the one Arrow <-> PostgreSQL type map of Flightline,
// shared by the PostgreSQL sink (flightsink/postgres) and source
// (flightsrc/postgres). It encodes Arrow columns straight into the binary
// COPY stream and decodes binary result values straight into Arrow builders,
// without a per-row []any; CopyDecoder does the same for a whole binary COPY
// stream (the postgres-cdc source's snapshot pages).
//
// Type map, Arrow -> PostgreSQL (the sink; see docs/sinks/postgres.md):
//
//	int8, int16, uint8          smallint
//	int32, uint16               integer
//	int64, uint32               bigint
//	float32                     real
//	float64                     double precision
//	bool                        boolean
//	utf8, large_utf8            text        (an existing varchar column is accepted)
//	binary, large_binary        bytea
//	timestamp[unit] (no tz)     timestamp without time zone
//	timestamp[unit, tz]         timestamp with time zone (Arrow values are UTC instants)
//	date32                      date
//	decimal128(p, s)            numeric(p, s) (an existing numeric of any typmod is accepted)
//	list<T>, large_list<T>      T[]  (one dimension; T any non-list type above, or struct/map)
//	struct, map                 jsonb (an existing json column is accepted)
//
// Everything else (uint64, float16, date64, time, duration, interval,
// dictionaries, unions, fixed-size binary, lists of lists, ...) is refused
// with flightline.ErrInvalidInput before anything is written. PostgreSQL
// stores microseconds: nanosecond timestamps that are not whole microseconds
// are refused with ErrInvalidInput rather than silently truncated.
//
// The reverse map (the source) is the inverse on canonical types: smallint ->
// int16, integer -> int32, bigint -> int64, real -> float32, double -> float64,
// boolean -> bool, text/varchar/char/name -> utf8, bytea -> binary,
// timestamp -> timestamp[us], timestamptz -> timestamp[us, UTC], date ->
// date32, numeric(p<=38, s) -> decimal128(p, s), arrays of those -> list<T>,
// json/jsonb -> utf8 (the JSON text). Any other column (uuid, unconstrained
// numeric, intervals, ...) is read as its text form into utf8.
package pgarrow
