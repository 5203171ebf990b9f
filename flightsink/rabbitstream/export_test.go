package rabbitstream

import "github.com/flightline/flightline/flightsink"

// CutNextBatch makes w publish only the first k messages of its next
// batch and then fail, as a writer killed in the middle of the batch.
func CutNextBatch(w flightsink.Writer, k int) { w.(*Writer).cut = k }
