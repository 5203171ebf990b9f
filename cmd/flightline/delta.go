package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	srcdelta "github.com/flightline/flightline/flightsrc/delta"
	"github.com/flightline/flightline/internal/objstore"
)

// Delta endpoints take the table location after "delta:" and options as
// query keys; the AWS_* storage options (as delta-rs names them) are query
// keys too:
//
//	delta:/data/orders?checkpoint_interval=10
//	delta:s3://lake/orders?AWS_ENDPOINT_URL=http://127.0.0.1:7070&AWS_ALLOW_HTTP=true
//
// Put credentials in the environment (AWS_ACCESS_KEY_ID, ...: the SDK's
// default chain) rather than on the command line.

func deltaLocation(u *url.URL, q query) (string, map[string]string, error) {
	loc := u.Opaque
	if loc == "" {
		loc = u.Path
	}
	if loc == "" {
		return "", nil, fmt.Errorf("delta: want delta:PATH or delta:s3://BUCKET/PREFIX")
	}
	storage := map[string]string{}
	for _, k := range objstore.OptionKeys() {
		if v, ok := q.take(k); ok {
			storage[k] = v
		}
	}
	return loc, storage, nil
}

func init() {
	sinkKinds["delta"] = sinkKind{
		usage: "delta:PATH|s3://BUCKET/PREFIX?instance=NAME&checkpoint_interval=N&schema_evolution=BOOL&AWS_*=…  exactly-once Delta Lake table (target: sub-directory)",
		open: func(u *url.URL, q query) (flightsink.Sink, func(), error) {
			loc, storage, err := deltaLocation(u, q)
			if err != nil {
				return nil, nil, err
			}
			opts := []sinkdelta.Option{sinkdelta.StorageOptions(storage)}
			if v, ok := q.take("instance"); ok {
				opts = append(opts, sinkdelta.Instance(v))
			}
			if v, ok := q.take("checkpoint_interval"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, nil, fmt.Errorf("delta: checkpoint_interval=%q: %w", v, err)
				}
				opts = append(opts, sinkdelta.CheckpointInterval(n))
			}
			if v, ok := q.take("schema_evolution"); ok {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return nil, nil, fmt.Errorf("delta: schema_evolution=%q: %w", v, err)
				}
				opts = append(opts, sinkdelta.SchemaEvolution(b))
			}
			if err := q.done("delta"); err != nil {
				return nil, nil, err
			}
			s, err := sinkdelta.New(context.Background(), loc, opts...)
			return s, func() {}, err
		},
	}
	sourceKinds["delta"] = sourceKind{
		usage: "delta:PATH|s3://BUCKET/PREFIX?once=BOOL&stream=NAME&batch_rows=N&poll=DURATION&AWS_*=…  a Delta Lake table: snapshot, then new commits (once: stop at the current version)",
		open: func(u *url.URL, q query) (flightsrc.Source, func(), error) {
			loc, storage, err := deltaLocation(u, q)
			if err != nil {
				return nil, nil, err
			}
			opts := []srcdelta.Option{srcdelta.StorageOptions(storage)}
			if v, ok := q.take("once"); ok {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return nil, nil, fmt.Errorf("delta: once=%q: %w", v, err)
				}
				opts = append(opts, srcdelta.Once(b))
			}
			if v, ok := q.take("stream"); ok {
				opts = append(opts, srcdelta.Stream(v))
			}
			if v, ok := q.take("batch_rows"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, nil, fmt.Errorf("delta: batch_rows=%q: %w", v, err)
				}
				opts = append(opts, srcdelta.BatchRows(n))
			}
			if v, ok := q.take("poll"); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					return nil, nil, fmt.Errorf("delta: poll=%q: %w", v, err)
				}
				opts = append(opts, srcdelta.PollInterval(d))
			}
			if err := q.done("delta"); err != nil {
				return nil, nil, err
			}
			s, err := srcdelta.New(context.Background(), loc, opts...)
			return s, func() {}, err
		},
	}
}
