package kafkadecode

import "github.com/apache/arrow-go/v18/arrow"

// MetadataKeyTopic is the schema metadata key holding the topic name. The
// topic is schema metadata rather than a column because a Decoder serves one
// topic: a constant column would cost a value per row for no information.
// Code that merges batches of several topics should turn it into a column.
const MetadataKeyTopic = "kafka.topic"

// Column names and positions of the output record batches.
const (
	ColPartition = "partition"
	ColOffset    = "offset"
	ColTimestamp = "timestamp"
	ColKey       = "key"
	ColValue     = "value"
	ColHeaders   = "headers"
)

// HeaderType is the element type of the headers column.
var HeaderType = arrow.StructOf(
	arrow.Field{Name: "key", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
)

// Schema returns the output schema for a topic: partition int32, offset
// int64, timestamp timestamp[ms, UTC], key binary_view (nullable), value
// (binary_view, or valueType when a ValueDecoder is used; nullable), and
// headers list<struct<key: utf8, value: binary>>. An empty topic leaves the
// metadata out.
func Schema(topic string, valueType arrow.DataType) *arrow.Schema {
	if valueType == nil {
		valueType = arrow.BinaryTypes.BinaryView
	}
	var md *arrow.Metadata
	if topic != "" {
		m := arrow.NewMetadata([]string{MetadataKeyTopic}, []string{topic})
		md = &m
	}
	return arrow.NewSchema([]arrow.Field{
		{Name: ColPartition, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColOffset, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColTimestamp, Type: arrow.FixedWidthTypes.Timestamp_ms},
		{Name: ColKey, Type: arrow.BinaryTypes.BinaryView, Nullable: true},
		{Name: ColValue, Type: valueType, Nullable: true},
		{Name: ColHeaders, Type: arrow.ListOfNonNullable(HeaderType)},
	}, md)
}
