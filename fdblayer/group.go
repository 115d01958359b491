package fdblayer

import (
	"context"
	"errors"
	"sync"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: group commit.
//
// On an engine whose commits share a sync (kv.GroupCommitter: bbolt,
// whose one writer writes its pages and fsyncs at each commit), Apply and
// Commit calls made at once queue for the writer, and each waits for the
// fsyncs of all those ahead of it. So the Layer commits them in groups,
// as databases group their commits: the first call to find no group
// forming leads one; it waits for the engine's write transaction, takes
// the calls queued by then (its own first, at most MaxGroupBatches of
// them, in the order they came), and runs them in that one transaction
// one after another, each against the state the ones before it left
// (their writes are kept aside, so that a later call's reads see them on
// every engine, see overlay): a call's deadlines, then its preconditions,
// then, only when every one of them holds, its writes. A call whose guard
// fails or whose deadline passed writes nothing and gets its own outcome;
// the calls after it go on. Then one commit, one fsync, and every call
// that wrote is answered with it. A commit that fails answers every call
// of the group with its error (ErrUnknownResult on bbolt: the file's
// state is unknown), since each decided on the writes of the calls before
// it. The leader hands the lead to the first call still queued before it
// answers its group, so that the next group forms while this one is
// answered, and, when fewer than MaxGroupBatches calls are queued ahead
// of it, each call waits for its own group and the write transactions
// that hold the writer before it: the group in flight when it came, and
// a TransactOnce that takes the writer first. A call whose context
// ends before its group runs it writes nothing and fails with its
// context's error.
//
// A call alone waits for no one: it leads a group of one, as Apply would
// commit it. TransactOnce, whose function must read in the writer's
// transaction, takes the writer on its own.

// grouper forms and leads the group commits of a Layer.
type grouper struct {
	l   *Layer
	max int

	mu      sync.Mutex
	queue   []*groupCall
	leading bool
}

// groupCall is one Apply or Commit call waiting in a group commit.
type groupCall struct {
	ctx   context.Context
	units []unit
	// wake is signalled once: when the call is answered (out, err set),
	// or when it is to lead (lead set).
	wake chan struct{}
	lead bool
	out  store.CommitOutcome
	err  error
}

// submit commits units in a group commit and returns their outcome.
func (g *grouper) submit(ctx context.Context, units []unit) (store.CommitOutcome, error) {
	c := &groupCall{ctx: ctx, units: units, wake: make(chan struct{}, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.leading {
		g.mu.Unlock()
		<-c.wake
		if !c.lead {
			return c.out, c.err
		}
	} else {
		g.leading = true
		g.mu.Unlock()
	}
	g.lead(c)
	return c.out, c.err
}

// lead runs one group commit whose first call is head, hands the lead
// on and answers the group's calls.
func (g *grouper) lead(head *groupCall) {
	txn, err := g.l.engine.Begin(context.WithoutCancel(head.ctx))
	g.mu.Lock()
	n := min(len(g.queue), g.max)
	calls := make([]*groupCall, n)
	copy(calls, g.queue)
	clear(g.queue[:n])
	g.queue = g.queue[n:]
	g.mu.Unlock()
	if err != nil {
		for _, c := range calls {
			c.err = g.l.opError("commit to", c.units[0].p, nil, err)
		}
	} else {
		g.l.runGroup(txn, calls)
		txn.Close()
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		next.lead = true
		next.wake <- struct{}{}
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	for _, c := range calls {
		if c != head {
			c.wake <- struct{}{}
		}
	}
}

// runGroup runs calls in txn, one after another on the state those
// before left, and commits what they wrote (see the design note). An
// engine error the engine retries (an injected conflict) runs the group
// again in a fresh transaction, within the retry limit; any other, and an
// unknown commit result, answers every call still unanswered with it.
func (l *Layer) runGroup(txn kv.Txn, calls []*groupCall) {
	for attempt := 0; ; attempt++ {
		committing, err := l.groupAttempt(txn, calls)
		if err == nil {
			return
		}
		unknown := committing && errors.Is(err, store.ErrUnknownResult)
		if !unknown && attempt < l.retryLimit && txn.OnError(err) == nil {
			continue
		}
		for _, c := range calls {
			if c.err != nil {
				continue // its context ended before it ran
			}
			// Decided on the writes of the calls before it: no outcome
			// of the group stands alone.
			c.out = store.CommitOutcome{}
			if unknown {
				c.err = l.opError("commit to", c.units[0].p, err, err)
			} else {
				c.err = l.opError("commit to", c.units[0].p, nil, err)
			}
		}
		return
	}
}

// groupAttempt is one attempt of runGroup. committing reports that err
// came from Commit.
func (l *Layer) groupAttempt(txn kv.Txn, calls []*groupCall) (committing bool, err error) {
	ov := &overlay{}
	otx := overlayTxn{Txn: txn, ov: ov}
	var vals [][]byte
	wrote := false
	for _, c := range calls {
		if c.err != nil {
			continue
		}
		if err := c.ctx.Err(); err != nil {
			c.err = l.opError("commit to", c.units[0].p, nil, err)
			continue
		}
		out, err := l.decide(txn, c.units, nil, ov, &vals)
		if errors.Is(err, store.ErrCorrupt) {
			// A wake time of its own that does not decode: its failure
			// alone.
			c.err = l.opError("commit to", c.units[0].p, nil, err)
			continue
		}
		if err != nil {
			return false, err
		}
		c.out = out
		if out.Committed() {
			l.writeUnits(otx, c.units)
			wrote = true
		}
	}
	if !wrote {
		return false, nil
	}
	if err := txn.Commit(); err != nil {
		return true, err
	}
	return false, nil
}

// overlay holds the writes of a group commit's calls so far, by engine
// key (nil: cleared), so that a later call's reads see them on engines
// whose transactions do not read their own writes.
type overlay struct{ m map[string][]byte }

// get returns the value o holds for key; ok is false when o holds none
// (a nil o holds none).
func (o *overlay) get(key []byte) (value []byte, ok bool) {
	if o == nil || o.m == nil {
		return nil, false
	}
	value, ok = o.m[string(key)]
	return value, ok
}

// overlayTxn is a transaction whose Set and Clear also record in ov.
type overlayTxn struct {
	kv.Txn
	ov *overlay
}

func (t overlayTxn) Set(key, value []byte) {
	if t.ov.m == nil {
		t.ov.m = make(map[string][]byte)
	}
	t.ov.m[string(key)] = value
	t.Txn.Set(key, value)
}

func (t overlayTxn) Clear(key []byte) {
	if t.ov.m == nil {
		t.ov.m = make(map[string][]byte)
	}
	t.ov.m[string(key)] = nil
	t.Txn.Clear(key)
}
