package pipelines_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/pipelines"
)

// Kafka into a Delta Lake table in one call. The example runs against an
// embedded Kafka (franz-go's kfake) holding 100 records; point
// kafka.Config.Brokers at a real cluster instead. The pipeline runs until its
// context ends; here it stops once the table's checkpoint covers the
// topic.
func ExampleKafkaToDelta() {
	ctx := context.Background()
	brokers, shutdown := exampleTopic("orders", 100) // a real cluster: "127.0.0.1:9092"
	defer shutdown()
	table, err := os.MkdirTemp("", "flightline-orders-") // or s3://bucket/prefix
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(table)

	r, err := pipelines.KafkaToDelta(ctx, pipelines.KafkaConfig{
		Topic:    "orders",
		Pipeline: flightsink.Pipeline{ID: "orders-to-delta"}, // also the consumer group
		Source:   kafka.Config{Brokers: brokers},
	}, table)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }() // Run closes r when it returns

	want := `{"positions":{"orders/0":100}}`
	for {
		cp, err := r.Checkpoint(ctx) // read from the table itself
		if err != nil {
			log.Fatal(err)
		}
		if string(cp) == want {
			fmt.Printf("table checkpoint %s\n", cp)
			break
		}
		select {
		case err := <-done:
			log.Fatalf("pipeline stopped early: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// table checkpoint {"positions":{"orders/0":100}}
}

// exampleTopic starts an embedded Kafka with one topic of n records and
// returns its brokers and the function that stops it.
func exampleTopic(topic string, n int) ([]string, func()) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		log.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		rec := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"id":%d}`, i)}
		if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}
	return c.ListenAddrs(), c.Close
}
