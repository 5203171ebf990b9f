package endpoint

import (
	"context"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
)

// Serve serves gs on lis until ctx ends (SIGTERM, SIGINT), then refuses new
// calls, gives the open ones up to 10s to end and cuts those still open
// (docs/chaining.md says so).
func Serve(ctx context.Context, gs *grpc.Server, lis net.Listener, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		log.Info("stopping: new calls are refused; open streams end within 10s", "addr", lis.Addr().String())
		done := make(chan struct{})
		go func() { gs.GracefulStop(); close(done) }()
		cut := false
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			gs.Stop()
			cut = true
		}
		log.Info("stopped", "addr", lis.Addr().String(), "streams_cut", cut)
		return nil
	}
}
