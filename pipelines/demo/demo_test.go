package demo

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
)

// Seed spreads the orders over the partitions and reports each one's end;
// Covered says when a checkpoint reaches them all.
func TestSeedAndCovered(t *testing.T) {
	c, ends, err := Seed(context.Background(), 10, 3)
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, checkpoint.Positions{"orders/0": 4, "orders/1": 3, "orders/2": 3}, ends)

	require.False(t, Covered(nil, ends), "nothing committed yet")
	short, err := json.Marshal(map[string]any{"positions": map[string]int64{"orders/0": 4, "orders/1": 3, "orders/2": 2}})
	require.NoError(t, err)
	require.False(t, Covered(short, ends), "one partition behind")
	all, err := json.Marshal(map[string]any{"positions": ends})
	require.NoError(t, err)
	require.True(t, Covered(all, ends))

	c2, empty, err := Seed(context.Background(), 0, 2)
	require.NoError(t, err)
	defer c2.Close()
	require.True(t, Covered(nil, empty), "an empty topic is covered from the start")
}

// The orders are the same bytes on every run, so a restarted demo finds
// the topic its table's checkpoint refers to.
func TestRecordsAreDeterministic(t *testing.T) {
	a, b := record(7, 4), record(7, 4)
	require.Equal(t, a.Value, b.Value)
	require.Equal(t, a.Key, b.Key)
	require.Equal(t, int32(3), a.Partition)
	var o map[string]any
	require.NoError(t, json.Unmarshal(a.Value, &o))
	require.Equal(t, 7.0, o["order_id"])
}
