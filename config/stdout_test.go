package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink/stdout"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestStdoutSinkSpec(t *testing.T) {
	for raw, want := range map[string]string{
		"stdout:?format=xml":   "format",
		"stdout:somewhere":     "want stdout: with options only",
		"stdout:?max_width=x":  "max_width",
		"stdout:?max_width=2":  "at least 4",
		"stdout:?colour=green": "unknown option(s) colour",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
	}
	term := false
	defer func(f func() bool) { stdoutIsTerminal = f }(stdoutIsTerminal)
	stdoutIsTerminal = func() bool { return term }
	for _, c := range []struct {
		raw      string
		terminal bool
		want     stdout.Format
	}{
		{"stdout:", false, stdout.JSONL},
		{"stdout:", true, stdout.Table},
		{"stdout:?format=auto", true, stdout.Table},
		{"stdout:?format=csv", true, stdout.CSV},
		{"stdout:?format=jsonl&max_width=10", true, stdout.JSONL},
		{"stdout:?format=table", false, stdout.Table},
	} {
		term = c.terminal
		s, closeFn, err := openSink(testEnv, c.raw, endpoint.ClientConfig{})
		require.NoError(t, err, c.raw)
		closeFn()
		require.Equal(t, c.want, s.(stdoutSink).Format(), "%s on a terminal: %v", c.raw, c.terminal)
	}
}
