package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// flightline check on a postgres-cdc source says wal_level and the slot's
// state: not created yet, then (after a read created it) its confirmed
// position and lag.
func TestIntegrationCheckPostgresCDC(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	pgtest.NeedLogical(t, c)
	table := pgtest.Name("checkcdc")
	pgtest.Exec(t, c, `CREATE TABLE `+table+` (id bigint PRIMARY KEY)`)
	t.Cleanup(func() {
		pgtest.Exec(t, c, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, table)
		pgtest.Exec(t, c, `DROP TABLE `+table)
	})
	path := writeConfig(t, fmt.Sprintf(`
sources:
  cdc:
    postgres-cdc: {dsn: '%s', table: %s, slot: %s}
`, dsn, table, table))
	check := func() string {
		var out bytes.Buffer
		require.NoError(t, checkCommand(context.Background(), []string{"--config", path, "--timeout", "30s"}, &out), out.String())
		return out.String()
	}
	require.Regexp(t, `ok    sources.cdc +postgres-cdc +asked for its streams \(read-only\); wal_level=logical; slot `+table+` not created yet`, check())
	pgtest.Exec(t, c, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, table)
	require.Regexp(t, `ok    sources.cdc +postgres-cdc +.*wal_level=logical; slot `+table+` idle, confirmed \d+/[0-9A-F]+, lag \d+ bytes; streams: `+table, check())
}
