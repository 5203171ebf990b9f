package srctest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/srctest"
)

const brokenEnv = "SRCTEST_BROKEN"

// The suite must fail a source that breaks the contract, in the check that
// covers the broken rule, and pass the checks the breakage does not touch.
// Each broken generator runs the suite in a child process (a failing suite
// fails its test), whose verdicts are read from -test.v output.
func TestSuiteFailsBrokenSources(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("in the child process")
	}
	cases := []struct {
		how      string
		fail     []string // checks that must fail, in both modes
		pass     []string // checks that must pass, in both modes
		failOnly []string // mode-qualified checks that must fail
		msg      string   // in the output, when set
	}{
		{how: "resume-skips-a-record", fail: []string{"ResumeAfterCheckpoint", "CommitIsAdvisory"}, pass: []string{"UnknownStreamNotFound", "CloseMidStream"}},
		{how: "empty-checkpoint", fail: []string{"ResumeAfterCheckpoint"}, pass: []string{"UnknownStreamNotFound", "BadCheckpointInvalid"}},
		{how: "random-boundaries", fail: []string{"DeterministicBoundaries"}, pass: []string{"ResumeAfterCheckpoint", "CommitIsAdvisory", "EndOfStream"}},
		{how: "untyped-not-found", fail: []string{"UnknownStreamNotFound"}, pass: []string{"ResumeAfterCheckpoint"}},
		// Over Flight the server has usually read this short bounded stream
		// to its end before the client closes, and nothing is left to leak.
		{how: "close-leaks", failOnly: []string{"Local/CloseMidStream"}, pass: []string{"BadCheckpointInvalid"}},
		{how: "declared-unbounded", fail: []string{"EndOfStream"}},
		{how: "position-moves-back", fail: []string{"ResumeAfterCheckpoint"}, msg: "must not move back or vanish"},
		{how: "idle-moves-checkpoint", failOnly: []string{"Flight/Heartbeats"}, pass: []string{"ResumeAfterCheckpoint", "EndOfStream"}},
	}
	for _, c := range cases {
		t.Run(c.how, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenSource$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+c.how)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed a broken source (%s):\n%s", c.how, out)
			for _, mode := range []string{"Local", "Flight"} {
				for _, check := range c.fail {
					require.Contains(t, string(out), "--- FAIL: TestBrokenSource/"+mode+"/"+check+" ", "%s", out)
				}
				for _, check := range c.pass {
					require.Contains(t, string(out), "--- PASS: TestBrokenSource/"+mode+"/"+check+" ", "%s", out)
				}
			}
			for _, check := range c.failOnly {
				require.Contains(t, string(out), "--- FAIL: TestBrokenSource/"+check+" ", "%s", out)
			}
			require.Contains(t, string(out), c.msg)
		})
	}
}

type broken struct {
	flightsrc.Source
	how    string
	stream string
}

func (b *broken) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	if b.how == "untyped-not-found" && req.Stream != b.stream {
		return nil, errors.New("no such stream")
	}
	if b.how == "resume-skips-a-record" && req.After != nil {
		if p, err := checkpoint.Parse(req.After); err == nil {
			for k := range p {
				p[k]++
			}
			req.After = p.Encode()
		}
	}
	rd, err := b.Source.Read(ctx, req)
	if err != nil {
		return nil, err
	}
	return &brokenReader{Reader: rd, how: b.how, key: b.stream + "/0"}, nil
}

type brokenReader struct {
	flightsrc.Reader
	how     string
	key     string
	n       int
	pending []arrow.RecordBatch // random-boundaries: the rest of a split batch; close-leaks: read ahead
}

func (r *brokenReader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	r.n++
	switch r.how {
	case "empty-checkpoint":
		rec, cp, err := r.Reader.Next(ctx)
		if r.n == 2 {
			cp = nil
		}
		return rec, cp, err
	case "position-moves-back":
		rec, cp, err := r.Reader.Next(ctx)
		if r.n == 3 && err == nil {
			cp = checkpoint.Positions{r.key: 1}.Encode()
		}
		return rec, cp, err
	case "random-boundaries":
		if len(r.pending) > 0 {
			rec := r.pending[0]
			r.pending = r.pending[1:]
			return rec, r.cp(rec), nil
		}
		rec, cp, err := r.Reader.Next(ctx)
		if err != nil || rec.NumRows() < 2 || rand.IntN(2) == 0 {
			return rec, cp, err
		}
		m := 1 + rand.Int64N(rec.NumRows()-1)
		head, tail := rec.NewSlice(0, m), rec.NewSlice(m, rec.NumRows())
		rec.Release()
		r.pending = append(r.pending, tail)
		return head, r.cp(head), nil
	case "close-leaks":
		if len(r.pending) == 0 {
			rec, _, err := r.Reader.Next(ctx)
			if err != nil {
				return nil, nil, err
			}
			r.pending = append(r.pending, rec)
		}
		rec := r.pending[0]
		r.pending = r.pending[1:]
		if ahead, _, err := r.Reader.Next(ctx); err == nil {
			r.pending = append(r.pending, ahead) // read ahead; Close forgets it
		}
		return rec, r.cp(rec), nil
	}
	return r.Reader.Next(ctx)
}

// cp is the generator's checkpoint after rec.
func (r *brokenReader) cp(rec arrow.RecordBatch) []byte {
	ids := rec.Column(0).(*array.Int64)
	return checkpoint.Positions{r.key: ids.Value(ids.Len()-1) + 1}.Encode()
}

func (r *brokenReader) Close() error {
	if r.how == "random-boundaries" {
		for _, rec := range r.pending {
			rec.Release()
		}
	}
	r.pending = nil
	return r.Reader.Close()
}

// TestReferenceSource runs the suite on memSource, a small source that
// keeps the contract, bounded and unbounded: every check must pass.
func TestReferenceSource(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		t.Run(fmt.Sprintf("bounded=%v", bounded), func(t *testing.T) {
			srctest.Run(t, memHarness("", bounded, bounded))
		})
	}
}

// TestBrokenSource is the child process of TestSuiteFailsBrokenSources.
func TestBrokenSource(t *testing.T) {
	how := os.Getenv(brokenEnv)
	if how == "" {
		t.Skip("run by TestSuiteFailsBrokenSources")
	}
	switch how {
	case "declared-unbounded": // it ends, but says it does not
		srctest.Run(t, memHarness(how, true, false))
	case "idle-moves-checkpoint":
		srctest.Run(t, memHarness(how, false, false))
	default:
		srctest.Run(t, memHarness(how, true, true))
	}
}

// memHarness runs memSource, bounded or not, broken as how says, and
// declares declaredBounded.
func memHarness(how string, bounded, declaredBounded bool) srctest.Harness {
	var (
		mu      sync.Mutex
		streams = map[string]*memStream{}
	)
	stream := func(name string) *memStream {
		mu.Lock()
		defer mu.Unlock()
		return streams[name]
	}
	return srctest.Harness{
		NewStream: func(t *testing.T) string {
			mu.Lock()
			defer mu.Unlock()
			name := fmt.Sprintf("mem%d", len(streams))
			streams[name] = &memStream{changed: make(chan struct{})}
			return name
		},
		Append: func(t *testing.T, name string, from, to int64) {
			s := stream(name)
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, s.n, from)
			s.n = to
			close(s.changed)
			s.changed = make(chan struct{})
		},
		NewSource: func(t *testing.T, mem memory.Allocator, name string) flightsrc.Source {
			return &broken{Source: &memSource{s: stream(name), name: name, mem: mem, bounded: bounded, how: how}, how: how, stream: name}
		},
		Records: func(t *testing.T, _ string, rec arrow.RecordBatch) []srctest.Record {
			out := make([]srctest.Record, rec.NumRows())
			for i, id := range rec.Column(0).(*array.Int64).Int64Values() {
				out[i].ID = id
			}
			return out
		},
		Bounded:                 declaredBounded,
		DeterministicBoundaries: true,
	}
}

// memStream is a stream of the generator's rows [0, n); Append grows n.
type memStream struct {
	mu      sync.Mutex
	n       int64
	changed chan struct{} // closed and replaced when n grows
}

// memSource serves one memStream in batches of up to 7 rows, with the
// checkpoint {"<name>/0": next}. Bounded, a Reader ends at the n of Read.
type memSource struct {
	s       *memStream
	name    string
	mem     memory.Allocator
	bounded bool
	how     string
}

func (m *memSource) Streams(context.Context) ([]flightsrc.Stream, error) {
	return []flightsrc.Stream{{Name: m.name, Schema: flightsrc.GeneratorSchema}}, nil
}

func (m *memSource) Commit(context.Context, flightsrc.CommitRequest) error { return nil }

func (m *memSource) Read(_ context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	if req.Stream != m.name {
		return nil, fmt.Errorf("%w: no stream %q", flightline.ErrNotFound, req.Stream)
	}
	r := &memReader{m: m, end: -1}
	if req.After != nil {
		p, err := checkpoint.Parse(req.After)
		next, ok := p[m.name+"/0"]
		if err != nil || len(p) != 1 || !ok {
			return nil, fmt.Errorf("%w: not a checkpoint of %s: %q", flightline.ErrInvalidInput, m.name, req.After)
		}
		r.next = next
	}
	if m.bounded {
		m.s.mu.Lock()
		r.end = m.s.n
		m.s.mu.Unlock()
	}
	return r, nil
}

type memReader struct {
	m     *memSource
	next  int64
	end   int64 // bounded: where the Reader ends; -1: unbounded
	moved bool
}

func (r *memReader) Schema() *arrow.Schema { return flightsrc.GeneratorSchema }

func (r *memReader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	for {
		r.m.s.mu.Lock()
		n, changed := r.m.s.n, r.m.s.changed
		r.m.s.mu.Unlock()
		if r.end >= 0 {
			n = min(n, r.end)
			if r.next >= n {
				return nil, nil, io.EOF
			}
		}
		if r.next < n {
			end := min(r.next+7, n)
			rec := flightsrc.GenerateOrders(r.m.mem, r.next, end)
			r.next = end
			return rec, checkpoint.Positions{r.m.name + "/0": end}.Encode(), nil
		}
		if r.m.how == "idle-moves-checkpoint" && !r.moved {
			// A "heartbeat" past records it never returned: a resume
			// after it would lose them.
			r.moved = true
			rec := flightsrc.GenerateOrders(r.m.mem, 0, 0)
			return rec, checkpoint.Positions{r.m.name + "/0": r.next + 5}.Encode(), nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-changed:
		}
	}
}

func (r *memReader) Close() error { return nil }
