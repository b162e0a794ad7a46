package store

import "context"

// Finder is an optional capability of an [IdempotencyStore]: Find reports
// what holds key, as Begin would report it to a caller that does not get
// it, without reserving the key. found is false when nothing holds it
// (never reserved, released, or its record expired); otherwise the
// reservation is not owned, and holds the digest of the execution that
// holds or held the key and, once that execution is recorded, its record
// (a copy). The runtime asks it for the recorded outcome of a call it will
// not run (one that waits for an approval since used up); a store without
// it is asked with a Begin and a Release, which holds the key for a moment.
// Implementations must be safe for concurrent use.
type Finder interface {
	Find(ctx context.Context, key Key) (res Reservation, found bool, err error)
}

var _ Finder = (*memoryStore)(nil)

// Find reports what holds key, without reserving it.
func (s *memoryStore) Find(_ context.Context, key Key) (Reservation, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	en, ok := s.entries[key]
	switch {
	case !ok:
		return Reservation{}, false, nil
	case en.record == nil:
		return Reservation{Digest: en.digest}, true, nil
	case s.now().Before(en.expires):
		return Reservation{Digest: en.digest, Record: en.record.clone()}, true, nil
	}
	return Reservation{}, false, nil // expired: the sweeper or the next Begin drops it
}
