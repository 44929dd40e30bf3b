package sharding

import "time"

// LapseTerm ends the replica's current term now, as a renewal that began
// too late does, without the refresh that would have seen it end.
func (s *Shards) LapseTerm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.validUntil = time.Now()
}
