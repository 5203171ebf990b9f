package flightwire

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// Prefetch receives a stream's messages in a goroutine of its own, ahead
// of the reader, holding at most depth of them, so that a server can tell
// which messages have already arrived (Buffered) and act on them together
// (the sink server's group commit). It is a RecvStream for NewReader: on a
// stream that uses Codec it receives the zero-copy messages, otherwise
// plain FlightData.
//
// Stop ends it: messages received but not read are released (their bodies
// go back to gRPC's pool); the goroutine itself ends when the stream does
// (its context, when the handler returns). Recv and RecvMsg are for one
// goroutine, before Stop.
type Prefetch struct {
	s         RecvStream
	zero      bool
	ch        chan prefetched
	done      chan struct{}
	once      sync.Once
	last      error
	onReceive func()
}

type prefetched struct {
	fd  *flight.FlightData // without Codec
	m   inData             // with Codec
	err error
}

// NewPrefetch starts receiving s's messages. onReceive, if not nil, is
// called after each message is received (a test hook).
func NewPrefetch(s RecvStream, depth int, onReceive func()) *Prefetch {
	p := &Prefetch{s: s, zero: Enabled(s.Context()), ch: make(chan prefetched, max(depth, 1)),
		done: make(chan struct{}), onReceive: onReceive}
	go p.run()
	return p
}

func (p *Prefetch) run() {
	for {
		var it prefetched
		if p.zero {
			it.err = p.s.RecvMsg(&it.m)
		} else {
			it.fd, it.err = p.s.Recv()
		}
		if p.onReceive != nil {
			p.onReceive()
		}
		select {
		case p.ch <- it:
		case <-p.done:
			it.m.release()
			return
		}
		// Stop may have drained the channel just before that send.
		select {
		case <-p.done:
			p.drain()
			return
		default:
		}
		if it.err != nil {
			return
		}
	}
}

func (p *Prefetch) drain() {
	for {
		select {
		case it := <-p.ch:
			it.m.release()
		default:
			return
		}
	}
}

func (p *Prefetch) next() prefetched {
	if p.last != nil {
		return prefetched{err: p.last}
	}
	var it prefetched
	select {
	case it = <-p.ch:
	case <-p.done:
		it.err = ErrStopped
	}
	if it.err != nil {
		p.last = it.err
	}
	return it
}

// ErrStopped is what reading a Prefetch returns once Stop was called.
var ErrStopped = errors.New("flightwire: prefetch stopped")

// Recv implements RecvStream for a stream without Codec.
func (p *Prefetch) Recv() (*flight.FlightData, error) {
	it := p.next()
	return it.fd, it.err
}

// RecvMsg implements RecvStream for a stream with Codec.
func (p *Prefetch) RecvMsg(m any) error {
	d, ok := m.(*inData)
	if !ok {
		return fmt.Errorf("flightwire: Prefetch.RecvMsg into %T", m)
	}
	it := p.next()
	if it.err != nil {
		return it.err
	}
	*d = it.m
	return nil
}

// Context is the stream's context.
func (p *Prefetch) Context() context.Context { return p.s.Context() }

// Buffered is how many received messages wait to be read.
func (p *Prefetch) Buffered() int { return len(p.ch) }

// Stop stops prefetching and releases the messages not read. A read
// under way or later returns ErrStopped. Safe from any goroutine.
func (p *Prefetch) Stop() {
	p.once.Do(func() {
		close(p.done)
		p.drain()
	})
}
