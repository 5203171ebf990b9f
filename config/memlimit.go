package config

// The Go runtime's soft memory limit (--memory-limit), issue 20.

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// autoMemoryBase is the part of the automatic memory limit that does not
// scale with a Kafka source's fetch buffers: the decoding pieces, the
// batches being cut and in flight (the coordinator's window), the sink's
// encoding scratch and the runtime's own memory, at default settings.
const autoMemoryBase = 64 << 20

// memoryLimiter applies --memory-limit to the Go runtime
// (runtime/debug.SetMemoryLimit). "auto" (the default) sets the limit to
// autoMemoryBase plus twice the fetched bytes the process's Kafka sources
// may hold by their configuration (kafka.Source.BufferBudget: FetchMaxBytes
// + MaxBufferedBytes each; 96 MiB for one source at defaults), and leaves
// the runtime alone in a process without one, or when GOMEMLIMIT is set;
// "off" removes any limit; a size (bytes, or with a KiB, MiB or GiB
// suffix, as GOMEMLIMIT takes) sets that limit, GOMEMLIMIT or not.
//
// Why: the collector lets the heap grow to twice its live size before it
// collects (GOGC=100). The Kafka source's live heap swings between about 40
// and 70 MB with what is in flight when a collection starts (fetch
// responses, decompressed pieces, batches in the window, Parquet scratch),
// so without a limit the process's peak was twice the largest live heap
// it happened to meet, higher the longer it ran. Under the limit the heap
// is collected before it passes it, so the peak is the limit, reached early
// in any run. The limit is soft: the runtime never fails an allocation for
// it; a live heap above it makes collections more frequent (at most half
// the CPU), never an error.
type memoryLimiter struct {
	mu     sync.Mutex
	auto   bool
	budget int64
	log    *slog.Logger
	set    func(int64) int64 // debug.SetMemoryLimit; tests replace it
}

var memLimit = &memoryLimiter{set: debug.SetMemoryLimit, log: slog.New(slog.DiscardHandler)}

// SetMemoryLimit applies --memory-limit's value v (auto, off, or a size
// such as 512MiB) to the process, as memoryLimiter says; with auto, the
// Kafka sources opened after it raise the limit by their buffers. log
// receives the limit's changes at debug level. A size that does not parse
// is an error naming the flag.
func SetMemoryLimit(v string, log *slog.Logger) error { return memLimit.configure(v, log) }

// configure applies the flag's value.
func (m *memoryLimiter) configure(v string, log *slog.Logger) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log = log
	switch v {
	case "auto", "":
		m.auto = os.Getenv("GOMEMLIMIT") == ""
		m.apply()
		return nil
	case "off":
		m.auto = false
		m.set(math.MaxInt64)
		return nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return fmt.Errorf("--memory-limit: %w", err)
	}
	m.auto = false
	m.set(n)
	return nil
}

// addBudget adds (or, negative, removes) bytes a component holds by its
// configuration, and re-applies the automatic limit.
func (m *memoryLimiter) addBudget(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.budget += n
	m.apply()
}

func (m *memoryLimiter) apply() {
	if !m.auto || m.budget <= 0 {
		return
	}
	limit := autoMemoryBase + 2*m.budget
	m.set(limit)
	m.log.Debug("go memory limit set from the configured buffers", "limit_bytes", limit, "buffer_bytes", m.budget)
}

// ParseSize reads a byte count with an optional B, KiB, MiB, GiB or TiB
// suffix.
func ParseSize(v string) (int64, error) {
	mult := int64(1)
	num := v
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if s, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = s, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not auto, off or a positive size (e.g. 256MiB)", v)
	}
	return n * mult, nil
}
