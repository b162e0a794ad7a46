package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

// DefaultJournal is how many bytes of the outcomes it recorded a store
// remembers unless told otherwise ([WithJournal]): at about 500 bytes an
// outcome, the last minute of a host recording 1,000 outcomes a second.
const DefaultJournal = 32 << 20

// WithJournal sets how many bytes of the outcomes it recorded (their keys,
// outputs and errors) the store remembers in this process, newest kept
// first. When Redis loses its state (a restart without persistence, a
// failover to a replica that lagged), every store that finds it records
// what it remembers again while new executions are held, so that a retry
// of a request that finished before the loss gets its outcome instead of
// running again. The default is [DefaultJournal]; 0 remembers nothing.
// Redis Cluster keeps no marker of lost state, so there the journal is
// never used and keeps nothing.
func WithJournal(bytes int64) Option {
	return func(s *Store) {
		if bytes >= 0 {
			s.journal.budget = bytes
		}
	}
}

// journal is what a store remembers of the outcomes it recorded, oldest
// first, within its budget of bytes and their records' TTL.
type journal struct {
	mu      sync.Mutex
	budget  int64
	size    int64
	entries []entry
}

// entry is one recorded outcome: its key, its principal's records, the
// token of the reservation it replaced, and when it was recorded (by this
// host's clock, which only measures its age).
type entry struct {
	key, records, token string
	rec                 store.Record
	at                  time.Time
	ttl                 time.Duration
}

// entryOverhead approximates what an entry costs beyond its strings.
const entryOverhead = 160

func (e *entry) bytes() int64 {
	return int64(len(e.key)+len(e.records)+len(e.token)+len(e.rec.Digest)+len(e.rec.ExecutionID)+len(e.rec.Output)+len(e.rec.Error)) + entryOverhead
}

// add remembers e, forgetting the oldest entries beyond the budget and
// those whose record has expired. An entry larger than the budget alone is
// not kept.
func (j *journal) add(e entry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if e.bytes() > j.budget {
		return
	}
	j.entries = append(j.entries, e)
	j.size += e.bytes()
	drop := 0
	for drop < len(j.entries) && (j.size > j.budget || !e.at.Before(j.entries[drop].at.Add(j.entries[drop].ttl))) {
		j.size -= j.entries[drop].bytes()
		drop++
	}
	if drop > 0 {
		clear(j.entries[:drop])
		j.entries = j.entries[drop:]
	}
}

// live returns the entries whose record has not expired by now.
func (j *journal) live(now time.Time) []entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]entry, 0, len(j.entries))
	for _, e := range j.entries {
		if now.Before(e.at.Add(e.ttl)) {
			out = append(out, e)
		}
	}
	return out
}

// restoreScript records an outcome again (digest ARGV[1], execution
// ARGV[2], output ARGV[3], error ARGV[4], the token of its reservation
// ARGV[5]) for ARGV[6] ms at key KEYS[1], made ARGV[7] ms ago, when the key
// is gone or still holds that very reservation: a replica promoted before
// the record reached it keeps the reservation, which would otherwise lapse
// with its lease and let a retry run the call again. A key that holds a
// record, or another reservation, is left alone. A waiter of the
// reservation is woken on channel ARGV[8].
var restoreScript = redis.NewScript(clockLua + `
local v = redis.call('HMGET', KEYS[1], 'd', 't', 'w')
if v[1] and v[2] ~= ARGV[5] then
	return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'd', ARGV[1], 'e', ARGV[2], 'o', ARGV[3], 'x', ARGV[4], 'k', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if v[3] then
	redis.call('PUBLISH', ARGV[8], KEYS[1])
end
redis.call('ZADD', KEYS[2], clock() - tonumber(ARGV[7]), KEYS[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[6]) then
	redis.call('PEXPIRE', KEYS[2], ARGV[6])
end
return 1
`)

// watchScript notes whether Redis lost its state, as every guarded script
// does (with the caller's known marker ARGV[1], and ARGV[2] for a new
// one), and returns the marker's id and the time of the last loss found.
var watchScript = redis.NewScript(guardLua + `
local id, since = guard(KEYS[1], ARGV[1], ARGV[2], clock())
return {id, since}
`)

// remember keeps an outcome this store recorded in its journal, starting
// the watch for lost state with the first.
func (s *Store) remember(e entry) {
	if s.marker == "" || s.journal.budget == 0 {
		return
	}
	s.journal.add(e)
	s.startWatch()
}

// startWatch starts the watch for lost state, once: with the first
// reservation or outcome, since only a host that holds one has something
// to restore.
func (s *Store) startWatch() {
	if s.marker != "" {
		s.watchOnce.Do(func() { s.watching.Go(s.watch) })
	}
}

// lossSeen wakes the watch at once: a script answered with a marker this
// store did not know, or held a new execution after a loss.
func (s *Store) lossSeen() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// watch looks every poll interval, and at once when poked, whether Redis
// lost its state since the last look: a new marker, or a later loss noted
// in it. Then it records the journal's outcomes again, within the lease
// for which every host holds new executions. It ends when the store
// closes.
func (s *Store) watch() {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	// A loss noted before the first reservation is not news; one noted
	// since is, even when found at the first look.
	id, since := s.knownEpoch(), s.firstSince.Load()
	pending := false // a loss was found, and its outcomes are not all restored
	for {
		ctx, cancel := context.WithTimeout(context.Background(), max(s.poll, time.Second))
		v, err := watchScript.Run(ctx, s.upkeep.get(), []string{s.marker}, s.knownEpoch(), newToken()).Slice()
		cancel()
		if err == nil && len(v) == 2 {
			newID, _ := v[0].(string)
			newSince, _ := v[1].(int64)
			if newID != id || (since >= 0 && newSince > since) {
				pending = true
				// New executions are held for a renewal interval at most:
				// every reservation this host holds is restored now,
				// whatever its lease.
				s.lost.fire()
			}
			id, since = newID, newSince
			s.learnEpoch(id)
		}
		if pending && err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			n, err := s.restore(ctx)
			cancel()
			if err != nil {
				s.logger.Warn("carmy/redisstore: Redis lost its state; cannot record again the outcomes this host remembers yet", "error", err)
			} else {
				pending = false
				s.logger.Warn("carmy/redisstore: Redis lost its state; recorded again the outcomes this host remembers", "restored", n)
			}
		}
		select {
		case <-s.closed:
			return
		case <-t.C:
		case <-s.poke:
		}
	}
}

// restore records again every outcome the journal remembers that Redis
// lost, and returns how many it recorded.
func (s *Store) restore(ctx context.Context) (int, error) {
	entries := s.journal.live(time.Now())
	if len(entries) == 0 {
		return 0, nil
	}
	restored := 0
	const batch = 256
	for start := 0; start < len(entries); start += batch {
		now := time.Now()
		runs := make([]scriptRun, 0, batch)
		for _, e := range entries[start:min(start+batch, len(entries))] {
			if left := e.at.Add(e.ttl).Sub(now); left > 0 {
				runs = append(runs, scriptRun{restoreScript, []string{e.key, e.records}, []any{
					e.rec.Digest, e.rec.ExecutionID, e.rec.Output, e.rec.Error, e.token, millis(left), now.Sub(e.at).Milliseconds(), s.channel}})
			}
		}
		for _, cmd := range evalScripts(ctx, s.upkeep.get(), runs) {
			n, err := cmd.Int64()
			if err != nil {
				return restored, err
			}
			restored += int(n)
		}
	}
	return restored, nil
}
