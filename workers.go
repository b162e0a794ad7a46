package carmy

import (
	"sync"
	"time"
)

// workerIdle is how long an idle worker waits for the next execution
// before it exits.
const workerIdle = 500 * time.Millisecond

// workers runs executions on goroutines that are kept for the next one.
// Every execution needs a goroutine of its own, so that its caller can be
// answered at the deadline whatever the tool does; a fresh goroutine
// would grow its stack on every call through reflection, which costs more
// than the rest of the call. Idle workers exit after workerIdle, or at once
// when the registry closes, so an idle registry holds no goroutine for
// long.
type workers struct {
	jobs chan runner
	stop chan struct{}
	once sync.Once
}

func newWorkers() *workers {
	return &workers{jobs: make(chan runner), stop: make(chan struct{})}
}

// runner is one execution. An interface holding a pointer costs no
// allocation, where a closure would.
type runner interface{ run() }

// run starts f on an idle worker, or on a new one when all are busy.
func (w *workers) run(f runner) {
	select {
	case w.jobs <- f:
	default:
		go w.work(f)
	}
}

func (w *workers) work(f runner) {
	f.run()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		select {
		case f := <-w.jobs:
			f.run()
			idle.Reset(workerIdle)
		case <-idle.C:
			return
		case <-w.stop:
			return
		}
	}
}

// close makes idle workers exit; busy ones exit when their job returns.
func (w *workers) close() {
	w.once.Do(func() { close(w.stop) })
}
