package clickhouse

// SetAfterInsert makes every batch's checkpoint row fail with fn's error
// after its data insert: a crash between the two.
func (s *Sink) SetAfterInsert(fn func() error) { s.afterInsert = fn }
