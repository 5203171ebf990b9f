package coordinator_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
)

// A coordinator moves a generated stream into a Dir sink: each batch and
// its checkpoint are one committed file. A second run resumes after the
// sink's checkpoint and finds nothing left to write.
func Example() {
	ctx := context.Background()
	root, err := os.MkdirTemp("", "flightline-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)

	gen, err := flightsrc.NewGenerator(flightsrc.GenRows(1000), flightsrc.GenBatchRows(250))
	if err != nil {
		log.Fatal(err)
	}
	sink, err := flightsink.NewDir(root, nil)
	if err != nil {
		log.Fatal(err)
	}
	p := flightsink.Pipeline{ID: "orders-to-files", Target: "orders"}
	for range 2 {
		c, err := coordinator.New(gen, sink, "orders", p)
		if err != nil {
			log.Fatal(err)
		}
		// Run returns at the end of a bounded stream, when ctx ends, or
		// on an error retrying cannot fix.
		if err := c.Run(ctx); err != nil {
			log.Fatal(err)
		}
		st := c.Stats()
		fmt.Printf("wrote %d rows in %d batches\n", st.Rows, st.Batches)
	}
	cp, err := sink.Checkpoint(ctx, p)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("checkpoint %s\n", cp)
	// Output:
	// wrote 1000 rows in 4 batches
	// wrote 0 rows in 0 batches
	// checkpoint {"positions":{"orders/0":1000}}
}
