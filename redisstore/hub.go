package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// hub is a store's one subscription to its "done" channel, shared by every
// caller waiting in this process: a message names the key of a finished
// reservation or a released lock, and wakes the waiters registered for
// that key. It starts with the store (or its first waiter) and runs
// until the store closes.
//
// A waiter registers before it looks at Redis, so a message published
// after that look reaches it. Messages published while the subscription
// is down (before it first starts, or while go-redis reconnects) are lost;
// every (re)subscription therefore wakes all waiters to look again, and
// waiters also look again after the store's poll interval.
type hub struct {
	client  redis.UniversalClient
	channel string

	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{}
	started bool
	closed  bool
	ps      *redis.PubSub // set by run once subscribed
	done    chan struct{} // closed when run ends
}

type waiter struct{ ch chan struct{} }

func (w *waiter) wake() {
	select {
	case w.ch <- struct{}{}:
	default: // already woken; one look covers both
	}
}

func newHub(client redis.UniversalClient, channel string) *hub {
	return &hub{client: client, channel: channel, waiters: map[string]map[*waiter]struct{}{}}
}

// add registers a waiter for key, starting the subscription if needed.
func (h *hub) add(key string) *waiter {
	w := &waiter{ch: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.waiters[key]
	if ws == nil {
		ws = map[*waiter]struct{}{}
		h.waiters[key] = ws
	}
	ws[w] = struct{}{}
	h.startLocked()
	return w
}

// start starts the subscription ahead of the first waiter, so that the
// first wait is woken as fast as the later ones, not after a subscription
// is made.
func (h *hub) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.startLocked()
}

func (h *hub) startLocked() {
	if !h.started && !h.closed {
		h.started = true
		h.done = make(chan struct{})
		go h.run()
	}
}

// run subscribes and receives until the hub closes. go-redis connects
// (Subscribe dials at once, so not under h.mu), reconnects and subscribes
// again in the background, and reports each subscription on the channel.
func (h *hub) run() {
	defer close(h.done)
	ps := h.client.Subscribe(context.Background(), h.channel)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		_ = ps.Close()
		return
	}
	h.ps = ps
	h.mu.Unlock()
	h.receive(ps.ChannelWithSubscriptions())
}

// remove unregisters a waiter.
func (h *hub) remove(key string, w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.waiters[key]
	delete(ws, w)
	if len(ws) == 0 {
		delete(h.waiters, key)
	}
}

func (h *hub) receive(msgs <-chan any) {
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			h.wake(m.Payload)
		case *redis.Subscription:
			// Subscribed, or subscribed again after a reconnection: what
			// was published in between is lost, so everyone looks again.
			h.wakeAll()
		}
	}
}

func (h *hub) wake(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.waiters[key] {
		w.wake()
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ws := range h.waiters {
		for w := range ws {
			w.wake()
		}
	}
}

// close ends the subscription. Waiters still registered go on polling.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	ps, done := h.ps, h.done
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	if done != nil {
		<-done // run closes a subscription it made after this
	}
}
