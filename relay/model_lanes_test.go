package relay_test

import (
	"context"
	"math/rand/v2"
	"sync"

	"github.com/mkit-dev/mkitfdb/relay"
)

// The model's target lanes. A fire delivers to its targets concurrently
// (relay.Budget.Concurrency), each target's batches in a lane of their
// own; the model runs each dispatch's lanes through a turnstile, so that a
// seed still replays exactly: the lanes and the fire's own goroutine (the
// dispatcher) hold one baton, passed at every store call a lane makes and
// whenever the holder waits, to a holder the seed chooses. Which lane
// makes its next call, and when the dispatcher sees a lane finish and
// starts the next, is the seed's choice, not the Go scheduler's; every
// order the lanes can finish in is reachable.

// turnstile is one dispatch's lanes, run one at a time.
type turnstile struct {
	rng *rand.Rand // the seed's: the world's in the model
	mu  sync.Mutex
	// parked lanes wait for the baton: at their start or at a store call.
	parked []*laneTurn
	// finished lists the lanes that returned, for Wait, in order.
	finished []int
	// live counts the lanes started and not finished.
	live int
	// dispatcher wakes the dispatcher, waiting in Wait.
	dispatcher chan struct{}
	waiting    bool
}

// laneTurn is one lane of a turnstile.
type laneTurn struct {
	t    *turnstile
	id   int
	wake chan struct{}
}

type laneKey struct{}

func (w *world) newTurnstile() relay.LaneRunner { return newTurnstile(w.rng) }

func newTurnstile(rng *rand.Rand) *turnstile {
	return &turnstile{rng: rng, dispatcher: make(chan struct{}, 1)}
}

// Go parks the lane until the baton reaches it.
func (t *turnstile) Go(ctx context.Context, id int, lane func(ctx context.Context)) {
	lt := &laneTurn{t: t, id: id, wake: make(chan struct{}, 1)}
	t.mu.Lock()
	t.parked = append(t.parked, lt)
	t.live++
	t.mu.Unlock()
	ctx = context.WithValue(ctx, laneKey{}, lt)
	go func() {
		<-lt.wake
		lane(ctx)
		t.mu.Lock()
		t.live--
		t.finished = append(t.finished, lt.id)
		t.pass()
		t.mu.Unlock()
	}()
}

// Wait returns a finished lane, or passes the baton and waits for one.
func (t *turnstile) Wait() int {
	t.mu.Lock()
	if len(t.finished) == 0 {
		t.waiting = true
		t.pass()
		t.mu.Unlock()
		<-t.dispatcher
		t.mu.Lock()
		t.waiting = false
	}
	id := t.finished[0]
	t.finished = t.finished[1:]
	t.mu.Unlock()
	return id
}

// yield parks the calling lane, which holds the baton, and waits for it
// to come back.
func (lt *laneTurn) yield() {
	t := lt.t
	t.mu.Lock()
	t.parked = append(t.parked, lt)
	t.pass()
	t.mu.Unlock()
	<-lt.wake
}

// concurrent reports whether other lanes of the dispatch are started and
// not finished.
func (lt *laneTurn) concurrent() bool {
	lt.t.mu.Lock()
	defer lt.t.mu.Unlock()
	return lt.t.live > 1
}

// pass gives the baton to a parked lane or, when a lane has finished, to
// the waiting dispatcher: the seed chooses among them. t.mu is held, and
// the caller holds the baton.
func (t *turnstile) pass() {
	n := len(t.parked)
	if t.waiting && len(t.finished) > 0 {
		n++
	}
	i := 0
	if n > 1 {
		i = t.rng.IntN(n)
	}
	if i == len(t.parked) {
		t.dispatcher <- struct{}{}
		return
	}
	lt := t.parked[i]
	t.parked = append(t.parked[:i], t.parked[i+1:]...)
	lt.wake <- struct{}{}
}

// laneOf returns the lane a store call comes from (nil: the fire's own
// goroutine, or another actor).
func laneOf(ctx context.Context) *laneTurn {
	lt, _ := ctx.Value(laneKey{}).(*laneTurn)
	return lt
}
