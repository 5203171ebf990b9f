// Package demo is the data of `flightline demo`: an in-memory Kafka
// cluster (franz-go's kfake) holding a topic of generated orders, and the
// helpers that run a pipeline from it until a sink holds every order.
// The orders are the same bytes at the same partitions and offsets on
// every run, so a demo restarted after a kill finds the topic its table's
// checkpoint refers to, and resumes there.
package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/transform"
)

// Order is one generated order, as JSON in the embedded topic and as
// the typed columns of the Delta table.
type Order struct {
	OrderID   int64     `arrow:"order_id,required" json:"order_id"`
	Customer  string    `arrow:"customer" json:"customer"`
	Item      string    `arrow:"item" json:"item"`
	Quantity  int32     `arrow:"quantity" json:"quantity"`
	Price     float64   `arrow:"price" json:"price"`
	CreatedAt time.Time `arrow:"created_at,unit=ms" json:"created_at"`
}

var items = []string{"keyboard", "mouse", "monitor", "laptop", "dock", "cable", "headset", "webcam"}

// record is order i of the demo topic: the same bytes, partition and
// (hence) offset on every run, so a restarted demo re-creates the topic
// its table's checkpoint refers to.
func record(i int64, partitions int32) *kgo.Record {
	v := fmt.Appendf(nil, `{"order_id":%d,"customer":"customer-%d","item":"%s","quantity":%d,"price":%d.%02d,"created_at":%d}`,
		i, i%9973, items[i%int64(len(items))], 1+i%5, 5+i%500, i%100, 1767225600000+i)
	return &kgo.Record{Partition: int32(i % int64(partitions)), Key: fmt.Appendf(nil, "order-%d", i), Value: v}
}

// Seed starts an in-memory kfake cluster holding rows orders, spread
// round-robin over partitions partitions of topic "orders", and returns
// it with each partition's end offset. The caller closes the cluster.
func Seed(ctx context.Context, rows int64, partitions int32) (*kfake.Cluster, checkpoint.Positions, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "orders"))
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	defer cl.Close()
	errc := make(chan error, 1)
	for i := range rows {
		cl.Produce(ctx, record(i, partitions), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		c.Close()
		return nil, nil, err
	}
	select {
	case err := <-errc:
		c.Close()
		return nil, nil, fmt.Errorf("seeding the embedded Kafka: %w", err)
	default:
	}
	ends := checkpoint.Positions{}
	for p := range partitions {
		n := rows / int64(partitions)
		if int64(p) < rows%int64(partitions) {
			n++
		}
		ends[fmt.Sprintf("orders/%d", p)] = n
	}
	return c, ends, nil
}

// Covered reports whether checkpoint cp (a checkpoint.Positions, as a
// Kafka pipeline's sink commits it) reaches ends in every partition; an
// empty topic is always covered.
func Covered(cp []byte, ends checkpoint.Positions) bool {
	empty := true
	for _, v := range ends {
		empty = empty && v == 0
	}
	if empty {
		return true
	}
	if cp == nil {
		return false
	}
	p, err := checkpoint.Parse(cp)
	return err == nil && checkpoint.Covers(p, ends)
}

// Pause is a transform that waits d before passing each batch on (a slow
// demo, for crash tests); it returns the batch retained, and ctx's error
// if ctx ends first.
func Pause(d time.Duration) transform.Func {
	return func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		rec.Retain()
		return rec, nil
	}
}
