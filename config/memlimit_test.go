package config

import (
	"log/slog"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMain keeps the commands the tests run in-process from setting this
// test binary's memory limit (the tests of memoryLimiter use their own).
func TestMain(m *testing.M) {
	memLimit.set = func(int64) int64 { return 0 }
	os.Exit(m.Run())
}

// limiter is a memoryLimiter recording what it would set.
func limiter() (*memoryLimiter, *[]int64) {
	var got []int64
	return &memoryLimiter{set: func(n int64) int64 { got = append(got, n); return 0 }}, &got
}

// auto sets base + twice the Kafka sources' fetch buffers (96 MiB for one
// source at defaults) and follows sources opened and closed; without a
// Kafka source it leaves the runtime alone.
func TestMemoryLimitAuto(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	m, got := limiter()
	require.NoError(t, m.configure("auto", slog.New(slog.DiscardHandler)))
	require.Empty(t, *got, "no Kafka source, no limit")
	m.addBudget(16 << 20)
	require.Equal(t, []int64{96 << 20}, *got)
	m.addBudget(16 << 20)
	require.Equal(t, []int64{96 << 20, 128 << 20}, *got)
	m.addBudget(-16 << 20)
	require.Equal(t, []int64{96 << 20, 128 << 20, 96 << 20}, *got)
}

// GOMEMLIMIT, when set, stands against auto; an explicit size or off wins.
func TestMemoryLimitGOMEMLIMITAndExplicit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	m, got := limiter()
	log := slog.New(slog.DiscardHandler)
	require.NoError(t, m.configure("auto", log))
	m.addBudget(16 << 20)
	require.Empty(t, *got)

	m, got = limiter()
	require.NoError(t, m.configure("300MiB", log))
	m.addBudget(16 << 20)
	require.Equal(t, []int64{300 << 20}, *got)

	m, got = limiter()
	require.NoError(t, m.configure("off", log))
	m.addBudget(16 << 20)
	require.Equal(t, []int64{math.MaxInt64}, *got)

	for _, bad := range []string{"lots", "-5MiB", "0", "12XB"} {
		require.Error(t, (&memoryLimiter{set: func(int64) int64 { return 0 }}).configure(bad, log), bad)
	}
	n, err := ParseSize("2GiB")
	require.NoError(t, err)
	require.EqualValues(t, 2<<30, n)
	n, err = ParseSize("12345")
	require.NoError(t, err)
	require.EqualValues(t, 12345, n)
}
