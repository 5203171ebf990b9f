// Package chtest reaches the ClickHouse stand-in the tests use
// (integration/services/chdb_server.py, ClickHouse 26.9 in chdb behind a
// small HTTP front) and reads tables back with plain HTTP, without the
// sink's code.
package chtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// Front is a ClickHouse HTTP endpoint and its credentials.
type Front struct {
	URL, User, Password string
}

// Need returns the front services.sh started, or skips (fails under
// FLIGHTLINE_REQUIRE_SERVICES=1).
func Need(tb testing.TB) Front {
	tb.Helper()
	u := servicetest.Need(tb, "FLIGHTLINE_CLICKHOUSE_URL", "ClickHouse (chdb front)")
	return Front{URL: u, User: os.Getenv("FLIGHTLINE_CLICKHOUSE_USER"), Password: os.Getenv("FLIGHTLINE_CLICKHOUSE_PASSWORD")}
}

// Query runs sql (with FORMAT TabSeparated appended when it has no FORMAT)
// and returns the answer's lines.
func (f Front) Query(tb testing.TB, sql string) []string {
	tb.Helper()
	out, err := f.Exec(sql)
	if err != nil {
		tb.Fatalf("clickhouse %q: %v", sql, err)
	}
	s := strings.TrimRight(out, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Exec runs sql and returns the answer's body.
func (f Front) Exec(sql string) (string, error) {
	if !strings.Contains(strings.ToUpper(sql), " FORMAT ") && strings.HasPrefix(strings.ToUpper(strings.TrimSpace(sql)), "SELECT") {
		sql += " FORMAT TabSeparated"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+"/?"+url.Values{"wait_end_of_query": {"1"}}.Encode(), strings.NewReader(sql))
	if err != nil {
		return "", err
	}
	req.SetBasicAuth(f.User, f.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return string(b), nil
}

// IDs reads the int64 column id of every row of table.
func (f Front) IDs(tb testing.TB, table string) []int64 {
	tb.Helper()
	if f.Query(tb, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = '"+table+"'")[0] == "0" {
		return nil
	}
	var ids []int64
	for _, l := range f.Query(tb, "SELECT id FROM `"+table+"`") {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			tb.Fatalf("id %q: %v", l, err)
		}
		ids = append(ids, n)
	}
	return ids
}
