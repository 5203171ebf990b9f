package coordinator

import "time"

// BackoffOf exposes the wait before attempt n of c, for tests.
func BackoffOf(c *Coordinator, n int) time.Duration { return c.backoff(n) }
