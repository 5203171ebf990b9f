package kafkadecode

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Layout of a magic v2 record batch header (all integers big endian).
const (
	offBaseOffset      = 0  // int64
	offBatchLength     = 8  // int32: bytes after this field
	offMagic           = 16 // int8 (offset 12 is the leader epoch)
	offCRC             = 17 // uint32 CRC32C of bytes [21:]
	offAttributes      = 21 // int16
	offLastOffsetDelta = 23 // int32
	offBaseTimestamp   = 27 // int64
	offMaxTimestamp    = 35 // int64
	offProducerID      = 43 // int64
	offRecordCount     = 57 // int32
	batchHeaderLen     = 61
	logOverhead        = 12 // base offset + batch length

	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20

	maxViewOffset = math.MaxInt32
)

// Compression codec ids from the batch attributes.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLz4    = 3
	codecZstd   = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the decoded fixed header of a v2 batch.
type batchHeader struct {
	baseOffset    int64
	lastOffset    int64
	attributes    int16
	baseTimestamp int64
	maxTimestamp  int64
	producerID    int64
	numRecords    int32
}

func readBatchHeader(b []byte) batchHeader {
	_ = b[batchHeaderLen-1]
	base := int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	return batchHeader{
		baseOffset:    base,
		lastOffset:    base + int64(int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))),
		attributes:    int16(binary.BigEndian.Uint16(b[offAttributes:])),
		baseTimestamp: int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		maxTimestamp:  int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		producerID:    int64(binary.BigEndian.Uint64(b[offProducerID:])),
		numRecords:    int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
}

// uvarint reads an unsigned LEB128 varint of at most 10 bytes. n is 0 when
// b is too short and negative on overflow, as in encoding/binary.
func uvarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return binary.Uvarint(b)
}

// varint reads a zigzag varint as Kafka encodes int32 and int64 fields.
func varint(b []byte) (int64, int) {
	u, n := uvarint(b)
	return int64(u>>1) ^ -int64(u&1), n
}
