package flightwire

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// TestSweeperFreesOnlyWhatAFailedNextLeft: allocations of a Next that
// returned a batch are the batch's and never swept; those of a failed Next
// still outstanding at Release are freed, those freed before are not freed
// twice.
func TestSweeperFreesOnlyWhatAFailedNextLeft(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s := newSweeper(mem)

	s.begin()
	kept := s.Allocate(100) // a batch's buffer
	s.end(true)

	s.begin()
	dict := s.Allocate(64)           // say, a dictionary the reader holds
	lost := s.Allocate(200)          // the failed batch's buffers
	grown := s.Reallocate(300, lost) // moved while loading
	zero := s.Allocate(0)
	s.end(false)
	require.Equal(t, 100+64+300+len(zero), mem.CurrentAlloc())

	s.Free(dict) // the reader's Release
	s.sweep()
	require.Equal(t, 100, mem.CurrentAlloc(), "only the earlier batch's buffer is left")
	_ = grown

	s.Free(kept) // the batch released after the reader
	mem.AssertSize(t, 0)
	s.sweep() // nothing more
	mem.AssertSize(t, 0)
}
