package main

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flightline/flightline/flightsink"
	pgsink "github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/flightsrc"
	pgsrc "github.com/flightline/flightline/flightsrc/postgres"
)

// The PostgreSQL endpoints take the connection URL itself as the spec; the
// Flightline options are query keys removed before the URL reaches pgx:
//
//	postgres://user@host:5432/db?sslmode=disable&table=sales.orders
//
// Put the password in PGPASSWORD or ~/.pgpass (or passfile=) rather than
// on the command line, where other users can read it.

// pgConnKeys are the libpq-style query keys passed through to pgx; any
// other key is an error, so a typo is not silently sent to the server.
var pgConnKeys = map[string]bool{
	"sslmode": true, "sslrootcert": true, "sslcert": true, "sslkey": true, "sslpassword": true,
	"sslsni": true, "connect_timeout": true, "application_name": true, "target_session_attrs": true,
	"passfile": true, "search_path": true,
}

func pgDSN(u *url.URL, q query, kind string) (string, error) {
	var bad []string
	pass := url.Values{}
	for k, v := range q {
		if !pgConnKeys[k] {
			bad = append(bad, k)
			continue
		}
		pass[k] = v
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return "", fmt.Errorf("%s: unknown option(s) %s", kind, strings.Join(bad, ", "))
	}
	d := *u
	d.RawQuery = pass.Encode()
	return d.String(), nil
}

func init() {
	sink := sinkKind{
		usage: "postgres://USER@HOST:PORT/DB?table=[SCHEMA.]TABLE&checkpoint_table=NAME&max_conns=N&sslmode=…  exactly-once PostgreSQL (binary COPY; password via PGPASSWORD/.pgpass)",
		open: func(u *url.URL, q query) (flightsink.Sink, func(), error) {
			var opts []pgsink.Option
			if v, ok := q.take("table"); ok {
				opts = append(opts, pgsink.Table(v))
			}
			if v, ok := q.take("checkpoint_table"); ok {
				opts = append(opts, pgsink.CheckpointTable(v))
			}
			if v, ok := q.take("max_conns"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, nil, fmt.Errorf("postgres: max_conns=%q: %w", v, err)
				}
				opts = append(opts, pgsink.MaxConns(n))
			}
			dsn, err := pgDSN(u, q, "postgres")
			if err != nil {
				return nil, nil, err
			}
			s, err := pgsink.New(dsn, opts...)
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		},
	}
	sinkKinds["postgres"] = sink
	sink.usage = "postgresql://…  same as postgres://"
	sinkKinds["postgresql"] = sink

	src := sourceKind{
		usage: "postgres://USER@HOST:PORT/DB?table=[SCHEMA.]TABLE&watermark=COL&key=COL&poll=DURATION&batch_rows=N  incremental PostgreSQL reads (stream = table)",
		open: func(u *url.URL, q query) (flightsrc.Source, func(), error) {
			table, _ := q.take("table")
			wm, _ := q.take("watermark")
			key, _ := q.take("key")
			opts := []pgsrc.Option{pgsrc.Table(table, wm, key)}
			if v, ok := q.take("poll"); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					return nil, nil, fmt.Errorf("postgres: poll=%q: %w", v, err)
				}
				opts = append(opts, pgsrc.PollInterval(d))
			}
			if v, ok := q.take("batch_rows"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, nil, fmt.Errorf("postgres: batch_rows=%q: %w", v, err)
				}
				opts = append(opts, pgsrc.BatchSize(n))
			}
			dsn, err := pgDSN(u, q, "postgres")
			if err != nil {
				return nil, nil, err
			}
			s, err := pgsrc.New(dsn, opts...)
			return s, func() {}, err
		},
	}
	sourceKinds["postgres"] = src
	src.usage = "postgresql://…  same as postgres://"
	sourceKinds["postgresql"] = src
}
