package kafka

import (
	"context"

	"github.com/flightline/flightline/flightsink"
)

// SetBeforeCommit installs a hook WriteBatch calls after every record of
// the transaction is produced and flushed, before the commit; an error it
// returns aborts the transaction.
func SetBeforeCommit(w flightsink.Writer, f func(context.Context) error) {
	w.(*writer).beforeCommit = f
}
