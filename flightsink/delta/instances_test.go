package delta_test

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
)

// zpos is a Positions checkpoint of partitions "t/0" at a and "t/1" at b
// (a negative position leaves the key out).
func zpos(a, b int64) []byte {
	p := checkpoint.Positions{}
	if a >= 0 {
		p["t/0"] = a
	}
	if b >= 0 {
		p["t/1"] = b
	}
	return p.Encode()
}

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// A partition handed over from one instance to another while the first is
// cut off from its consumer group (a zombie: nobody claims its instance,
// so it is not fenced): of the two writers of the partition, whichever
// commits second is refused with ErrConflict (ABORTED: re-open) and writes
// nothing; a zombie batch the other instance's commits cover is a replay.
// After a re-open the refused writer resumes from the merged checkpoint.
// The zombie's commit is refused whether its snapshot already holds the
// other instance's commit or it learns of it by losing the commit race
// (the check runs again against the newer table version).
func TestInstancesZombieHandOver(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, tc := range []struct {
		name string
		// zombieFirst: the zombie commits t/0 before the new owner does.
		zombieFirst bool
		// current: the zombie commits t/1 after the new owner's commit,
		// so its snapshot holds that commit before it writes t/0 (no
		// commit race to lose).
		current bool
	}{
		{name: "zombie second, after a lost commit race"},
		{name: "zombie second, snapshot current", current: true},
		{name: "zombie first", zombieFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := flightsink.Pipeline{ID: "zombie"}
			sink := func(inst string) *delta.Sink {
				s, err := delta.New(ctx, delta.Config{URI: dir, Instance: inst}, delta.Allocator(mem))
				require.NoError(t, err)
				return s
			}
			open := func(inst string) (flightsink.Writer, string) {
				w, cp, err := sink(inst).Open(ctx, p)
				require.NoError(t, err)
				return w, string(cp)
			}
			write := func(w flightsink.Writer, from, to int64, cp []byte) error {
				rec := sinktest.Batch(mem, from, to)
				defer rec.Release()
				return w.WriteBatch(ctx, rec, cp)
			}
			refused := func(err error, msg string) {
				t.Helper()
				require.ErrorIs(t, err, flightline.ErrConflict, msg)
				require.NotErrorIs(t, err, flightline.ErrFenced, msg)
				require.Equal(t, codes.Aborted, status.Code(flighterr.ToStatus(err)), msg)
			}

			// Instance a wrote t/0 up to 10 before; a (re-)opens at 10.
			a0, _ := open("a")
			require.NoError(t, write(a0, 0, 10, zpos(10, -1)))
			a, cp := open("a")
			require.Equal(t, string(zpos(10, -1)), cp)
			// a is cut off; the group gives t/0 to b, which resumes it at 10.
			b, cp := open("b")
			require.Equal(t, string(zpos(10, -1)), cp)

			if tc.zombieFirst {
				require.NoError(t, write(a, 10, 15, zpos(15, -1)), "the zombie commits before b writes t/0")
				refused(write(b, 10, 20, zpos(20, -1)), "b resumed t/0 at 10, a moved it to 15")
				// b re-opens and resumes from 15.
				b2, cp := open("b")
				require.Equal(t, string(zpos(15, -1)), cp)
				require.NoError(t, write(b2, 15, 20, zpos(20, -1)))
				require.Equal(t, span(0, 20), slices.Sorted(slices.Values(readIDs(t, dir, nil))), "every id once")
				return
			}
			require.NoError(t, write(b, 10, 20, zpos(20, -1)), "b takes t/0 over")
			if tc.current {
				require.NoError(t, write(a, 100, 105, zpos(-1, 5)), "a's own partition t/1")
			}
			// The zombie's batch reaching past b's commit is refused.
			refused(write(a, 10, 25, zpos(25, -1)), "the zombie's batch of t/0, taken over by b")
			// One that b's commit covers is a replay: acked, nothing written.
			require.NoError(t, write(a, 10, 15, zpos(15, -1)))
			// Its replay of what instance a did commit stays a no-op.
			require.NoError(t, write(a, 0, 10, zpos(10, -1)))
			want := span(0, 20)
			if tc.current {
				want = append(want, span(100, 105)...)
			}
			require.Equal(t, want, slices.Sorted(slices.Values(readIDs(t, dir, nil))), "nothing of the zombie's t/0 batches written")

			// a re-opens: it resumes from the merged checkpoint and writes.
			a2, cp := open("a")
			wantCP := zpos(20, -1)
			if tc.current {
				wantCP = zpos(20, 5)
			}
			require.Equal(t, string(wantCP), cp)
			require.NoError(t, write(a2, 20, 25, zpos(25, -1)))
			want = append(want, span(20, 25)...)
			require.Equal(t, slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(readIDs(t, dir, nil))), "every id once")
			got, err := sink("c").Checkpoint(ctx, p)
			require.NoError(t, err)
			if tc.current {
				require.Equal(t, string(zpos(25, 5)), string(got))
			} else {
				require.Equal(t, string(zpos(25, -1)), string(got))
			}
		})
	}
}

// Two instances commit one partition at once, both resumed from the same
// position (a hand-over whose zombie is still writing): whichever commits
// second is refused (ErrConflict) or, when the first one's commit covers
// its batch, a replay; no id is written twice, whichever wins the Delta
// commit race (the writer whose snapshot is current usually wins it: in
// even rounds a's is).
func TestInstancesConcurrentHandOver(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	wins := map[string]int{}
	for round := range 20 {
		dir := t.TempDir()
		p := flightsink.Pipeline{ID: "race"}
		open := func(inst string) flightsink.Writer {
			s, err := delta.New(ctx, delta.Config{URI: dir, Instance: inst}, delta.Allocator(mem))
			require.NoError(t, err)
			w, _, err := s.Open(ctx, p)
			require.NoError(t, err)
			return w
		}
		write := func(w flightsink.Writer, from, to int64) error {
			rec := sinktest.Batch(mem, from, to)
			defer rec.Release()
			return w.WriteBatch(ctx, rec, zpos(to, -1))
		}
		require.NoError(t, write(open("a"), 0, 10))
		a, b := open("a"), open("b")
		want25 := span(0, 25)
		if round%2 == 0 {
			// a commits its own partition t/1 first, so its snapshot holds
			// b's claim and a does not start the race a version behind.
			rec := sinktest.Batch(mem, 100, 101)
			require.NoError(t, a.WriteBatch(ctx, rec, zpos(-1, 1)))
			rec.Release()
		}
		ends := []int64{25, 20} // a's batch reaches further than b's
		errs := make([]error, 2)
		start := make(chan struct{})
		done := make(chan struct{})
		for i, w := range []flightsink.Writer{a, b} {
			go func() {
				defer func() { done <- struct{}{} }()
				<-start
				errs[i] = write(w, 10, ends[i])
			}()
		}
		close(start)
		<-done
		<-done
		for i, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, flightline.ErrConflict, "round %d writer %d", round, i)
			}
		}
		ids := readIDs(t, dir, nil)
		got := slices.Sorted(slices.Values(ids))
		if round%2 == 0 {
			require.Equal(t, int64(100), got[len(got)-1], "round %d", round)
			got = got[:len(got)-1]
		}
		switch {
		case slices.Equal(got, want25):
			wins["a"]++
			require.NoError(t, errs[0], "round %d", round)
		case slices.Equal(got, span(0, 20)):
			wins["b"]++
			require.NoError(t, errs[1], "round %d", round)
			require.Error(t, errs[0], "round %d: a's batch past b's commit", round)
		default:
			t.Fatalf("round %d: ids %v (errors %v)", round, got, errs)
		}
	}
	t.Logf("commit race won by instance: %v", wins)
}
