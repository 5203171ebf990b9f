package endpoint

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// blackhole is a TCP proxy that can stop delivering: while cut, it drops
// every byte it reads (both ways) and accepts no new connection, but keeps
// its sockets open, so neither end learns of it from TCP — what a network
// partition looks like to a connection with data waiting for an answer.
type blackhole struct {
	l     net.Listener
	to    string
	cut   atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func newBlackhole(t *testing.T, to string) *blackhole {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &blackhole{l: l, to: to}
	go b.serve()
	t.Cleanup(func() {
		l.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
	})
	return b
}

func (b *blackhole) serve() {
	for {
		in, err := b.l.Accept()
		if err != nil {
			return
		}
		if b.cut.Load() {
			// A SYN into a partition is not answered; the closest a
			// listener can do is to never speak on the connection.
			b.mu.Lock()
			b.conns = append(b.conns, in)
			b.mu.Unlock()
			continue
		}
		out, err := net.Dial("tcp", b.to)
		if err != nil {
			in.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, in, out)
		b.mu.Unlock()
		go b.pipe(in, out)
		go b.pipe(out, in)
	}
}

// pipe copies from src to dst, dropping what it reads while cut.
func (b *blackhole) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestKeepaliveEndsCallAcrossPartition: a streaming call whose server
// stops answering (a partition that TCP does not report) fails within
// KeepaliveTime + KeepaliveTimeout instead of waiting forever, and once
// the path is back the next call gets through within a few seconds. Before
// clients had keepalive, the call waited for TCP, and after a 40 s cut the
// pipeline resumed 13–15 s after the heal (integration
// TestIntegrationPartitions); through this proxy, which TCP never reports,
// it waited forever.
func TestKeepaliveEndsCallAcrossPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("a partition of ~15 s: skipped in -short mode")
	}
	t.Parallel()
	addr := start(t, ServerConfig{})
	bh := newBlackhole(t, addr)
	conn, err := Dial("grpc://"+bh.l.Addr().String(), ClientConfig{})
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	first, err := watch.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, first.Status)

	bh.cut.Store(true)
	cut := time.Now()
	ended := make(chan error, 1)
	go func() {
		_, err := watch.Recv() // nothing more comes: the status does not change
		ended <- err
	}()
	bound := KeepaliveTime + KeepaliveTimeout + 5*time.Second // a loaded machine's slack
	select {
	case err := <-ended:
		took := time.Since(cut)
		t.Logf("the open call failed %v into the partition: %v", took.Round(100*time.Millisecond), err)
		require.Equal(t, codes.Unavailable, status.Code(err))
	case <-time.After(bound):
		t.Fatalf("the open call did not fail within %v of the partition", bound)
	}

	bh.cut.Store(false)
	healed := time.Now()
	for {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		err := healthy(cctx, conn)
		ccancel()
		if err == nil {
			break
		}
		require.Less(t, time.Since(healed), 30*time.Second, "no call got through after the heal: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(healed)
	t.Logf("a call got through %v after the heal", took.Round(10*time.Millisecond))
	require.Less(t, took, ConnectTimeout+2*ReconnectMaxDelay, "reconnecting after the partition took too long")
}
