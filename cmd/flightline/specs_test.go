package main

import (
	"bytes"
	"testing"

	"github.com/flightline/flightline/config"
	"github.com/stretchr/testify/require"
)

// serve-source --help lists the source kinds' options, generated from
// their specs (config's TestUsageFromSpecs checks the specs' side).
func TestUsageFromSpecs(t *testing.T) {
	var out bytes.Buffer
	fs := newFlagSet("serve-source", "x")
	fs.SetOutput(&out)
	fs.Usage()
	require.Contains(t, out.String(), config.SourceUsage(), "serve-source --help lists the source kinds")
	require.Contains(t, out.String(), "kafka:?brokers=HOST:PORT&topics=T,T&")
	require.NotContains(t, out.String(), "kafka:?brokers=HOST:PORT&topic=T&", "and only those")
}
