package integration

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
)

// storekillEmulator is a store emulator the test runs (and restarts) itself,
// on its own port and data directory, so the shared services are left
// alone.
type storekillEmulator struct {
	name string
	// stopSignal is how it is stopped mid-stream: SIGKILL where the
	// emulator writes each object before it answers (fake-gcs-server's
	// filesystem backend), SIGTERM where it keeps its metadata in memory
	// and saves it on a timer (Azurite's LokiJS database: a kill -9 loses
	// what it acknowledged since the last save, which is the emulator's
	// loss, not one a real store has).
	stopSignal syscall.Signal
	// argv is the emulator's command line on port with its data in dir.
	argv func(t *testing.T, port, dir string) []string
	// dest makes a destination on the emulator at endpoint.
	dest func(t *testing.T, port string) (spec string, fetch func(context.Context, *testing.T, string) string)
}

var storekillEmulators = []storekillEmulator{
	{name: "gcs", stopSignal: syscall.SIGKILL,
		argv: func(t *testing.T, port, dir string) []string {
			return []string{Need(t, "FLIGHTLINE_GCS_BIN", "the fake-gcs-server binary"), "-scheme", "http", "-host", "127.0.0.1", "-port", port,
				"-backend", "filesystem", "-filesystem-root", dir, "-public-host", "127.0.0.1:" + port,
				"-external-url", "http://127.0.0.1:" + port, "-log-level", "warn"}
		},
		dest: func(t *testing.T, port string) (string, func(context.Context, *testing.T, string) string) {
			endpoint := "http://127.0.0.1:" + port
			bucket := objsinktest.NewBucket(t, endpoint)
			return fmt.Sprintf("gcs:%s/lake?endpoint=%s", bucket, endpoint), pythonFetch("gcs", endpoint, bucket, "lake")
		}},
	{name: "azblob", stopSignal: syscall.SIGTERM,
		argv: func(t *testing.T, port, dir string) []string {
			return []string{Need(t, "FLIGHTLINE_AZURITE_BIN", "the azurite-blob binary"), "--blobHost", "127.0.0.1", "--blobPort", port,
				"--location", dir, "--skipApiVersionCheck", "--disableTelemetry", "--silent"}
		},
		dest: func(t *testing.T, port string) (string, func(context.Context, *testing.T, string) string) {
			a := objsinktest.NeedAzurite(t)
			a.Endpoint = "http://127.0.0.1:" + port + "/" + a.Account
			cont := a.NewContainer(t)
			t.Setenv("AZURE_STORAGE_KEY", a.Key)
			return fmt.Sprintf("azblob:%s/lake?account=%s&endpoint=%s", cont, a.Account, a.Endpoint), pythonFetch("azblob", a.Endpoint, cont, "lake")
		}},
}

// TestIntegrationStoreRestart: fake-gcs-server and Azurite stopped under a
// running generator → gcs:/azblob: pipeline (three processes) for 3 s and
// started again on the same port and data; the pipeline must ride it out
// (the coordinator retries the sink's UNAVAILABLE) and every id must be
// read back exactly once by the store's own Python client and
// pyarrow.dataset. It runs under FLIGHTLINE_CHAOS=1 (make chaos): each
// emulator stopped three times (about 20–40 s per emulator); make test
// leaves it out for its time budget.
func TestIntegrationStoreRestart(t *testing.T) {
	if testing.Short() || !chaosMode() {
		t.Skip("fault test: runs under FLIGHTLINE_CHAOS=1 (make chaos)")
	}
	py := Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow")
	for _, e := range storekillEmulators {
		t.Run(e.name, func(t *testing.T) {
			port := storekillPort(t)
			dir := t.TempDir()
			var emu *proc
			startEmu := func() {
				argv := e.argv(t, port, dir)
				emu = start(t, argv[0], argv[1:]...)
				require.Eventually(t, func() bool {
					c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
					if err == nil {
						c.Close()
					}
					return err == nil
				}, time.Minute, 50*time.Millisecond, "%s did not start:\n%s", e.name, emu.log.String())
			}
			startEmu()
			spec, fetch := e.dest(t, port)
			restarts := killCount(1, 3)
			rows := int64(restarts) * 40000 // at most 10,000 rows/s: longer than the outages
			bin := flightlineBin(t)
			srcAddr, sinkAddr := freePort(t), freePort(t)
			logs := &syncBuffer{}
			src := start(t, bin, "serve-source", "--listen", srcAddr, "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=200&interval=20ms", rows))
			sink := start(t, bin, "serve-sink", "--listen", sinkAddr, "--sink", spec+"&format=parquet")
			run := startLogged(t, bin, logs, "run", "--source", "grpc://"+srcAddr, "--sink", "grpc://"+sinkAddr,
				"--stream", "orders", "--pipeline", "restart", "--target", "orders")
			var recovered []time.Duration
			for i := range restarts {
				// Stop the store while rows flow: once the sink has
				// committed more since the last restart.
				last := committedRows(t, sinkAddr, "restart", "orders")
				require.Eventually(t, func() bool { return committedRows(t, sinkAddr, "restart", "orders") > last }, time.Minute,
					50*time.Millisecond, "no commit before restart %d\n%s", i+1, logs.String())
				if done, _ := run.exited(); done || committedRows(t, sinkAddr, "restart", "orders") >= rows {
					t.Fatalf("the pipeline ended before restart %d; give it more rows\n%s", i+1, logs.String())
				}
				before := strings.Count(logs.String(), "pipeline interrupted")
				require.NoError(t, emu.cmd.Process.Signal(e.stopSignal))
				<-emu.doneOnce()
				time.Sleep(3 * time.Second)
				require.Greater(t, strings.Count(logs.String(), "pipeline interrupted"), before,
					"the pipeline did not notice the store was down: the fault was not reached\n%s", logs.String())
				startEmu()
				back := time.Now()
				// Recovered: the sink's checkpoint moves past where the
				// outage left it (its first answer after the restart: the
				// sink reads its checkpoint from the store, so none while
				// it is down).
				var cp string
				require.Eventually(t, func() bool { cp = storekillCheckpoint(t, sinkAddr); return cp != "" },
					time.Minute, 20*time.Millisecond, "the sink gave no checkpoint after the restart\n%s", sink.log.String())
				require.Eventually(t, func() bool { c := storekillCheckpoint(t, sinkAddr); return c != "" && c != cp },
					2*time.Minute, 100*time.Millisecond, "no commit within 2 minutes of the restart\n%s", logs.String())
				recovered = append(recovered, time.Since(back))
				t.Logf("%s stopped (%v) for 3 s and restarted; the sink committed again %v after the restart", e.name, e.stopSignal, recovered[i].Round(100*time.Millisecond))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			select {
			case err := <-run.doneOnce():
				require.NoError(t, err, "run:\n%s\nsink:\n%s", logs.String(), sink.log.String())
			case <-ctx.Done():
				t.Fatalf("pipeline did not finish:\n%s", logs.String())
			}
			src.kill()
			sink.kill()
			out, err := exec.Command(py, "python/verify_ids.py", fetch(ctx, t, "orders"), fmt.Sprint(rows), "parquet").CombinedOutput()
			require.NoErrorf(t, err, "independent check (every id exactly once) failed: %s", out)
			t.Logf("%s restarted %d times: %s", e.name, restarts, strings.TrimSpace(string(out)))
			worst := time.Duration(0)
			for _, d := range recovered {
				worst = max(worst, d)
			}
			appendChaosReport(t, []faultRow{{sink: e.name, fault: "emulator restart", faults: restarts, checked: int(rows), recovery: worst}})
		})
	}
}

// storekillPort is a free port on 127.0.0.1 (as a string).
func storekillPort(t *testing.T) string {
	_, port, err := net.SplitHostPort(freePort(t))
	require.NoError(t, err)
	return port
}

// storekillCheckpoint is the sink's checkpoint of the "restart" pipeline
// ("" when the sink does not answer).
func storekillCheckpoint(t *testing.T, sinkAddr string) string {
	cl, err := flightsink.Dial("grpc://"+sinkAddr, flightsink.ClientConfig{})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cp, err := cl.Checkpoint(ctx, flightsink.Pipeline{ID: "restart", Target: "orders"})
	if err != nil {
		return ""
	}
	return string(cp)
}
