package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultReplicaTimeout is how long Complete waits for the replicas that
// [WithReplicas] asks for, unless told otherwise.
const DefaultReplicaTimeout = time.Second

// WithReplicas makes Complete return only once n replicas of the primary
// hold the outcome (Redis's WAIT, sent after the record on the same
// connection), so that a failover to one of them keeps it; the runtime
// answers the caller after Complete returns. A replica that does not
// confirm within timeout makes Complete fail with an error that is not
// [store.ErrLostReservation]: the runtime then answers the caller and
// calls Complete again, with backoff, until the replicas confirm, while
// the store's journal ([WithJournal]) also remembers the outcome.
//
// The cost is a replication round trip on every recorded outcome (well
// under a millisecond on one network; more across zones), and timeout on
// every outcome while fewer than n replicas are up: ask for no more
// replicas than you run. n <= 0 waits for none (the default); timeout <= 0
// means [DefaultReplicaTimeout]. Keep timeout below the client's read
// timeout (go-redis's default is 3 s), which bounds the wait too. It needs one primary (a single-node or a
// failover client): New panics on a cluster client, whose pipelines may
// send WAIT to another node.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(s *Store) {
		s.replicas = max(n, 0)
		s.replicaTimeout = DefaultReplicaTimeout
		if timeout > 0 {
			s.replicaTimeout = timeout
		}
	}
}

// ErrNotReplicated is returned, wrapped, by Complete when the outcome is
// recorded on the primary but fewer replicas than [WithReplicas] asks for
// confirmed it in time. Complete may be called again: it records nothing
// twice, and waits for the replicas again.
var ErrNotReplicated = errors.New("the outcome is recorded on the primary, but fewer replicas than asked confirmed it")

// evalReplicated runs script on the primary and, when the store waits for
// replicas, WAIT after it on the same connection. It returns the script's
// answer, and an error when fewer replicas than asked confirmed it.
func (s *Store) evalReplicated(ctx context.Context, script *redis.Script, keys []string, args ...any) (int64, error) {
	if s.replicas == 0 {
		return script.Run(ctx, s.client, keys, args...).Int64()
	}
	for loaded := false; ; loaded = true {
		p := s.client.Pipeline()
		cmd := script.EvalSha(ctx, p, keys, args...)
		wait := p.Do(ctx, "WAIT", s.replicas, s.replicaTimeout.Milliseconds())
		_, _ = p.Exec(ctx) // each command carries its own error
		if err := cmd.Err(); err != nil && isNoScript(err) && !loaded {
			if err := script.Load(ctx, s.client).Err(); err != nil {
				return 0, err
			}
			continue
		}
		n, err := cmd.Int64()
		if err != nil {
			return 0, err
		}
		acked, err := wait.Int64()
		if err != nil {
			return n, err
		}
		if acked < int64(s.replicas) {
			return n, fmt.Errorf("redisstore: %w: %d of %d replicas confirmed the outcome within %v", ErrNotReplicated, acked, s.replicas, s.replicaTimeout)
		}
		return n, nil
	}
}

// replicaOption reads the URL parameters replicas and replica_timeout, and
// removes them from q.
func replicaOption(q url.Values) (Option, error) {
	if !q.Has("replicas") && !q.Has("replica_timeout") {
		return nil, nil
	}
	n, err := strconv.Atoi(q.Get("replicas"))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("redisstore: replicas=%q is not a positive number of replicas (replica_timeout needs it)", q.Get("replicas"))
	}
	timeout := DefaultReplicaTimeout
	if q.Has("replica_timeout") {
		if timeout, err = time.ParseDuration(q.Get("replica_timeout")); err != nil || timeout <= 0 {
			return nil, fmt.Errorf("redisstore: replica_timeout=%q is not a positive duration such as 500ms", q.Get("replica_timeout"))
		}
	}
	q.Del("replicas")
	q.Del("replica_timeout")
	return WithReplicas(n, timeout), nil
}
