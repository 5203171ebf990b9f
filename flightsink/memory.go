package flightsink

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
)

// Memory is an exactly-once sink that keeps committed batches in memory, for
// unit tests and the conformance suite. It Retains every committed batch
// until Release. Safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	targets map[string]*memTarget // by Pipeline.Target
	pipes   map[Pipeline]*memPipe // checkpoint and fencing epoch
	fail    func(p Pipeline, n int) error
}

type memTarget struct {
	schema  *arrow.Schema
	batches []arrow.RecordBatch
}

type memPipe struct {
	cp      []byte
	epoch   uint64
	commits int
}

// NewMemory returns an empty Memory sink.
func NewMemory() *Memory {
	return &Memory{targets: map[string]*memTarget{}, pipes: map[Pipeline]*memPipe{}}
}

// FailCommit makes the n-th (0-based) commit attempt of a pipeline fail with
// the error f returns, when non-nil, before anything is stored. Tests use it
// to inject failures.
func (m *Memory) FailCommit(f func(p Pipeline, n int) error) {
	m.mu.Lock()
	m.fail = f
	m.mu.Unlock()
}

// Guarantee implements Guaranteer.
func (m *Memory) Guarantee() Guarantee { return ExactlyOnce }

// Checkpoint implements Sink.
func (m *Memory) Checkpoint(_ context.Context, p Pipeline) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pp := m.pipes[p]; pp != nil {
		return slices.Clone(pp.cp), nil
	}
	return nil, nil
}

// Open implements Sink. It fences earlier writers of p by bumping p's epoch.
func (m *Memory) Open(_ context.Context, p Pipeline) (Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pipes[p]
	if pp == nil {
		pp = &memPipe{}
		m.pipes[p] = pp
	}
	pp.epoch++
	return &memWriter{m: m, p: p, epoch: pp.epoch}, slices.Clone(pp.cp), nil
}

// Batches returns the batches committed to target, each Retained: the caller
// must Release them.
func (m *Memory) Batches(target string) []arrow.RecordBatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.targets[target]
	if t == nil {
		return nil
	}
	out := slices.Clone(t.batches)
	for _, b := range out {
		b.Retain()
	}
	return out
}

// Release drops every stored batch. The sink is empty afterwards.
func (m *Memory) Release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.targets {
		for _, b := range t.batches {
			b.Release()
		}
	}
	m.targets = map[string]*memTarget{}
	m.pipes = map[Pipeline]*memPipe{}
}

type memWriter struct {
	m     *Memory
	p     Pipeline
	epoch uint64
}

func (w *memWriter) WriteBatch(_ context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := CheckBatch(rec, cp); err != nil {
		return err
	}
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pipes[w.p]
	if pp.epoch != w.epoch {
		return fmt.Errorf("%w: pipeline %q was reopened (epoch %d > %d)", flightline.ErrFenced, w.p.ID, pp.epoch, w.epoch)
	}
	if checkpoint.Replayed(pp.cp, cp) {
		return nil
	}
	t := m.targets[w.p.Target]
	if t != nil && t.schema != nil && !SameSchema(t.schema, rec.Schema()) {
		return fmt.Errorf("%w: target %q has schema %s, batch has %s", flightline.ErrSchemaMismatch, w.p.Target, t.schema, rec.Schema())
	}
	if m.fail != nil {
		if err := m.fail(w.p, pp.commits); err != nil {
			pp.commits++
			return err
		}
	}
	pp.commits++
	if t == nil {
		t = &memTarget{}
		m.targets[w.p.Target] = t
	}
	if t.schema == nil {
		t.schema = rec.Schema()
	}
	if rec.NumRows() > 0 {
		rec.Retain()
		t.batches = append(t.batches, rec)
	}
	pp.cp = checkpoint.Next(pp.cp, cp)
	return nil
}

func (w *memWriter) Close(context.Context) error { return nil }
