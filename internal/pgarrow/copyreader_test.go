package pgarrow

import (
	"errors"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// TestCopyReaderCloseStopsReads: after Close returns, a reader goroutine
// (pgconn's, in the sink) never touches the batch again, so the batch can be
// released; Reads after Close fail with ErrCopyReaderClosed.
func TestCopyReaderCloseStopsReads(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	for i := range 200_000 {
		b.Field(0).(*array.StringBuilder).Append(string(rune('a' + i%26)))
	}
	rec := b.NewRecordBatch()
	b.Release()
	enc, err := NewRowEncoder(rec, []uint32{25}) // text
	require.NoError(t, err)
	r := NewCopyReader(enc)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := r.Read(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	r.Close()
	rec.Release()
	err = <-done
	require.True(t, errors.Is(err, ErrCopyReaderClosed) || errors.Is(err, io.EOF), "got %v", err)
	_, err = r.Read(make([]byte, 16))
	require.ErrorIs(t, err, ErrCopyReaderClosed)
}
