package flightsink

// OnReceive sets a hook the DoPut prefetch goroutine calls for every
// message it receives.
func OnReceive(s *Server, f func()) { s.onReceive = f }
