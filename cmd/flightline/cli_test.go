package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/internal/endpoint"
)

// A command's --help shows its flags and only the kinds it takes; the
// whole catalogue is 'flightline kinds'; 'help CMD' is 'CMD --help' on
// stdout; version names the module and the commit.
func TestCLIHelpKindsVersion(t *testing.T) {
	ctx := context.Background()
	help := func(args ...string) string {
		var out bytes.Buffer
		err := runCommand(ctx, "help", args, &out)
		require.True(t, err == nil || errors.Is(err, flag.ErrHelp), "%v", err)
		return out.String()
	}
	sink := help("serve-sink")
	require.Contains(t, sink, "Usage: flightline serve-sink")
	require.Contains(t, sink, "-insecure-no-auth")
	require.Contains(t, sink, "Sinks (in-process kinds)")
	require.Contains(t, sink, "  dir:PATH")
	require.NotContains(t, sink, "Sources (in-process kinds)")
	require.NotContains(t, sink, "generator:")

	src := help("serve-source")
	require.Contains(t, src, "generator:?rows=N")
	require.NotContains(t, src, "Sinks (in-process kinds)")

	run := help("run")
	require.Contains(t, run, "Usage: flightline run")
	require.Contains(t, run, "sources: ")
	require.Contains(t, run, "flightline kinds")
	require.Less(t, strings.Count(run, "\n"), strings.Count(help("kinds"), "\n")/2, "run's help is not the whole catalogue")

	sync := help("sync")
	require.Contains(t, sync, "-once")
	require.NotContains(t, sync, "in-process kinds")

	var out bytes.Buffer
	require.NoError(t, runCommand(ctx, "kinds", nil, &out))
	require.Contains(t, out.String(), "Sources (in-process kinds)")
	require.Contains(t, out.String(), "Sinks (in-process kinds)")
	require.Equal(t, out.String(), help("kinds"))

	for _, v := range []string{"version", "--version"} {
		out.Reset()
		require.NoError(t, runCommand(ctx, v, nil, &out))
		require.Regexp(t, `^flightline \S+ \(module github.com/flightline/flightline \S+, commit .*, go1\.\d+`, out.String())
	}
	require.ErrorIs(t, runCommand(ctx, "nope", nil, &out), errUnknownCommand)
	require.ErrorIs(t, runCommand(ctx, "help", []string{"nope"}, &out), errUnknownCommand)
}

// An unknown key on the command line gets the config file's did-you-mean,
// and an error is printed with one "flightline:" prefix.
func TestCLIErrorsSayWhatToDo(t *testing.T) {
	_, _, err := config.OpenSource(context.Background(), testLog, nil, "generator:?rowz=5", endpoint.ClientConfig{})
	require.ErrorContains(t, err, `rowz: did you mean "rows"?`)
	_, _, err = config.OpenSink(context.Background(), testLog, nil, "dir:/tmp/x?zzzzzzzzzz=1", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "dir takes no options")
	require.Equal(t, "flightline: invalid input: x", errorLine(errors.New("flightline: invalid input: x")))
	require.Equal(t, "flightline: pipeline p: flightline: x", errorLine(errors.New("pipeline p: flightline: x")))
	require.Equal(t, "flightline: x", errorLine(errors.New("flightline: flightline: x")))
}

// run without --stream reads the source's only stream, whatever its name
// (it used to default to "orders").
func TestRunDefaultsToTheOnlyStream(t *testing.T) {
	logs := captureLogs(t)
	dir := t.TempDir()
	require.NoError(t, runPipeline(context.Background(), []string{"--source", "generator:?rows=300&batch_rows=100&stream=py-delta",
		"--sink", "dir:" + dir, "--pipeline", "p"}), logs.String())
	require.Contains(t, logs.String(), `msg="run finished" pipeline=p rows=300 `)
}

// A missing flightline.yml says how to point at another file or write one.
func TestMissingConfigFileHintsConfigFlag(t *testing.T) {
	t.Chdir(t.TempDir())
	err := syncCommand(context.Background(), nil)
	require.ErrorContains(t, err, "flightline.yml: no such file or directory: give --config FILE, or write flightline.yml here")
}
