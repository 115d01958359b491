package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// Method names a store.Store method that Faults intercepts.
type Method uint8

// The methods Faults intercepts: those of store.Store, store.DueIndex,
// store.Transactor and store.Committer. Capabilities is passed through untouched.
const (
	MethodGet Method = iota + 1
	MethodGetMany
	MethodScan
	MethodApply
	MethodStats
	MethodProbe
	MethodScanDue
	MethodNextWake
	// MethodTransact is store.Transactor's TransactOnce; the reads its
	// function makes are counted and faulted as reads (MethodGet, ...).
	MethodTransact
	// MethodCommit is store.Committer's Commit, and MethodTransactMany its
	// TransactManyOnce (whose function's reads are counted as reads).
	MethodCommit
	MethodTransactMany
	methodCount
)

func (m Method) String() string {
	switch m {
	case MethodGet:
		return "Get"
	case MethodGetMany:
		return "GetMany"
	case MethodScan:
		return "Scan"
	case MethodApply:
		return "Apply"
	case MethodStats:
		return "Stats"
	case MethodProbe:
		return "Probe"
	case MethodScanDue:
		return "ScanDue"
	case MethodNextWake:
		return "NextWake"
	case MethodTransact:
		return "TransactOnce"
	case MethodCommit:
		return "Commit"
	case MethodTransactMany:
		return "TransactManyOnce"
	}
	return fmt.Sprintf("Method(%d)", uint8(m))
}

// ErrInjected is the error Faults injects when a test names none. It wraps
// store.ErrUnavailable, so code under test sees an ordinary store outage.
var ErrInjected = fmt.Errorf("injected fault: %w", store.ErrUnavailable)

// Call describes one intercepted call, for the predicates and hooks of
// Faults. Its slices and batch are the caller's: read them, never modify.
type Call struct {
	Method Method
	// N numbers the call among all calls of Method on this Faults, from 1,
	// including calls that were failed or delayed.
	N int
	// Commit numbers an Apply, TransactOnce, Commit or TransactManyOnce
	// among all such calls on this Faults, from 1 (0 for other methods):
	// the calls that may commit, which the commit-then-fail rules count.
	Commit int
	// Partition is the call's partition (a Commit's or TransactManyOnce's
	// first); nil for Probe and ScanDue.
	Partition store.Partition
	Key       store.Key    // Get
	Keys      []store.Key  // GetMany
	Start     store.Key    // Scan
	End       store.Key    // Scan
	After     store.Cursor // Scan
	Limit     int          // Scan, ScanDue
	Batch     *store.Batch // Apply; TransactOnce once its function returned (nil before)
	// Batches are a Commit's batches, and a TransactManyOnce's once its
	// function returned (nil and empty batches left out).
	Batches []store.PartitionBatch
	// Partitions are a TransactManyOnce's partitions.
	Partitions []store.Partition
	Until      time.Time       // ScanDue: Due.Until
	AfterDue   *store.DueEntry // ScanDue: Due.After
	Due        store.DueQuery  // ScanDue
}

// rule is one configured fault: a failure of one method's calls, or a
// commit-then-fail of the calls that may commit (Apply and TransactOnce,
// numbered together by Call.Commit).
type rule struct {
	method         Method          // of a failure
	nth            int             // 0: any call number (Call.N, or Call.Commit for a commit-then-fail)
	match          func(Call) bool // nil: any call
	err            error           // failure to inject, when !commitThenFail
	commitThenFail bool
}

// describe names the call for error messages: method, number, partition.
func (c *Call) describe() string {
	if c.Partition == nil {
		return fmt.Sprintf("%v call %d", c.Method, c.N)
	}
	return fmt.Sprintf("%v call %d on %s", c.Method, c.N, store.PartitionName(c.Partition))
}

func (r *rule) matches(c Call) bool {
	n := c.N
	if r.commitThenFail {
		if c.Commit == 0 {
			return false
		}
		n = c.Commit
	} else if r.method != c.Method {
		return false
	}
	return (r.nth == 0 || r.nth == n) && (r.match == nil || r.match(c))
}

// Faults wraps a store.Store and injects faults into it: failed calls,
// commits whose result is lost, delays, and hooks that change the store
// between a caller's reads and its write. With nothing configured it is
// transparent. *Faults implements store.Store, store.ScanAppender,
// store.Transactor (see TransactOnce: over any inner store),
// store.Committer (see Commit and TransactManyOnce: over any inner store),
// store.Prefetcher (see Prefetch: over any inner store) and
// store.DueIndex (whose methods fail with store.ErrInvalid when the inner
// store keeps no due index: wrap such a store only where no code asserts
// DueIndex). It and
// its configuration methods are safe for concurrent use, and
// configuration may change while calls are in flight (a call sees the
// configuration of the moment it started).
//
// Per call, in order: the call is counted, the method's delay is waited
// out (or the context ends it), a matching failure rule fails it without
// reaching the inner store, BeforeApply hooks run (Apply), the inner store
// is called, AfterRead hooks run (reads), and a matching commit-then-fail
// rule replaces a committed outcome with an ErrUnknownResult error (Apply;
// TransactOnce orders these steps around its function: see there).
// Predicates and hooks run outside the lock and may call the Faults or
// Inner; calls through the Faults are counted and faulted like any other.
type Faults struct {
	inner store.Store

	mu          sync.Mutex
	calls       [methodCount]int
	commits     int // Apply and TransactOnce calls, counted together (Call.Commit)
	rules       []*rule
	delays      [methodCount]time.Duration
	beforeApply []func(ctx context.Context, p store.Partition, b *store.Batch) error
	afterRead   []func(ctx context.Context, c Call) error
}

// NewFaults returns a transparent fault-injecting wrapper of inner.
func NewFaults(inner store.Store) *Faults { return &Faults{inner: inner} }

// Inner returns the wrapped store, for hooks and assertions that must
// bypass the faults and counters.
func (f *Faults) Inner() store.Store { return f.inner }

func (f *Faults) addRule(r *rule) *Faults {
	if !r.commitThenFail && (r.method < MethodGet || r.method >= methodCount) {
		panic(fmt.Sprintf("storetest: Faults: no method %v", r.method))
	}
	if r.err == nil {
		r.err = ErrInjected
	}
	f.mu.Lock()
	f.rules = append(f.rules, r)
	f.mu.Unlock()
	return f
}

// FailNth makes call number n (from 1, counted since NewFaults) of method
// m fail with an error wrapping err (ErrInjected when nil), without
// reaching the inner store. It panics when n < 1.
func (f *Faults) FailNth(m Method, n int, err error) *Faults {
	if n < 1 {
		panic(fmt.Sprintf("storetest: FailNth(%v, %d): calls count from 1", m, n))
	}
	return f.addRule(&rule{method: m, nth: n, err: err})
}

// FailNext makes the next call of m fail with an error wrapping err
// (ErrInjected when nil), without reaching the inner store.
func (f *Faults) FailNext(m Method, err error) *Faults {
	return f.FailNth(m, f.Calls(m)+1, err)
}

// FailWhen makes every call of m for which match returns true fail with
// an error wrapping err (ErrInjected when nil), without reaching the inner
// store. A nil match matches every call.
func (f *Faults) FailWhen(m Method, match func(Call) bool, err error) *Faults {
	return f.addRule(&rule{method: m, match: match, err: err})
}

// CommitThenFailNth makes commit number n (from 1: the n-th Apply,
// TransactOnce, Commit or TransactManyOnce, counted together, see
// Call.Commit) reach the inner store
// and then, if its batch committed, return an error wrapping
// store.ErrUnknownResult instead of the outcome: FoundationDB's
// commit_unknown_result after a commit that landed. A batch that did not
// commit reports its outcome as usual. It panics when n < 1.
func (f *Faults) CommitThenFailNth(n int) *Faults {
	if n < 1 {
		panic(fmt.Sprintf("storetest: CommitThenFailNth(%d): calls count from 1", n))
	}
	return f.addRule(&rule{nth: n, commitThenFail: true})
}

// CommitThenFailNext does what CommitThenFailNth does to the next call
// that may commit (see Call.Commit), whichever comes first.
func (f *Faults) CommitThenFailNext() *Faults {
	f.mu.Lock()
	next := f.commits + 1
	f.mu.Unlock()
	return f.CommitThenFailNth(next)
}

// CommitThenFailWhen does what CommitThenFailNth does to every call that
// may commit for which match returns true (a nil match matches every
// one; a TransactOnce's Call.Batch is the batch its function returned, a
// TransactManyOnce's Call.Batches its batches).
func (f *Faults) CommitThenFailWhen(match func(Call) bool) *Faults {
	return f.addRule(&rule{match: match, commitThenFail: true})
}

// Delay makes every call of m wait d (real time) before anything else
// happens to it; 0 removes the delay. A call whose context ends first
// returns an error wrapping both store.ErrUnavailable and the context's
// error, without reaching the inner store.
func (f *Faults) Delay(m Method, d time.Duration) *Faults {
	if m < MethodGet || m >= methodCount {
		panic(fmt.Sprintf("storetest: Delay: no method %v", m))
	}
	f.mu.Lock()
	f.delays[m] = d
	f.mu.Unlock()
	return f
}

// BeforeApply adds a hook run by every Apply that will reach the inner
// store, just before it does: the moment between a caller's reads and its
// write. The hook may change the store through Inner (to make the caller's
// guards fail, say) and must not modify b. A hook error is returned,
// wrapped, and the inner Apply is not called. Hooks run in the order
// added; a hook meant to act once keeps its own count.
func (f *Faults) BeforeApply(hook func(ctx context.Context, p store.Partition, b *store.Batch) error) *Faults {
	f.mu.Lock()
	f.beforeApply = append(f.beforeApply, hook)
	f.mu.Unlock()
	return f
}

// AfterRead adds a hook run after every read (Get, GetMany, Scan, ScanDue,
// NextWake) that the inner store answered without error, before the result
// is returned. The hook may change the store through Inner. A hook error
// is returned, wrapped, in place of the result.
func (f *Faults) AfterRead(hook func(ctx context.Context, c Call) error) *Faults {
	f.mu.Lock()
	f.afterRead = append(f.afterRead, hook)
	f.mu.Unlock()
	return f
}

// Calls reports how many calls of m the Faults has seen, faulted or not.
func (f *Faults) Calls(m Method) int {
	if m < MethodGet || m >= methodCount {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[m]
}

// Clear removes every configured fault, delay and hook. Call counts are
// kept, so FailNth keeps counting from NewFaults.
func (f *Faults) Clear() {
	f.mu.Lock()
	f.rules, f.beforeApply, f.afterRead = nil, nil, nil
	f.delays = [methodCount]time.Duration{}
	f.mu.Unlock()
}

// plan is what happens to one call, fixed when it starts.
type plan struct {
	delay          time.Duration
	rules          []*rule
	fail           error
	commitThenFail bool
	beforeApply    []func(ctx context.Context, p store.Partition, b *store.Batch) error
	afterRead      []func(ctx context.Context, c Call) error
}

// start counts c, numbers it, and plans it.
func (f *Faults) start(c *Call) plan {
	pl := f.count(c)
	pl.match(c)
	return pl
}

// count counts c, numbers it, and takes the configuration of the moment,
// without matching its rules yet (a TransactOnce matches them once its
// function returned its batch).
func (f *Faults) count(c *Call) plan {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[c.Method]++
	c.N = f.calls[c.Method]
	if c.Method == MethodApply || c.Method == MethodTransact || c.Method == MethodCommit || c.Method == MethodTransactMany {
		f.commits++
		c.Commit = f.commits
	}
	return plan{delay: f.delays[c.Method], rules: f.rules, beforeApply: f.beforeApply, afterRead: f.afterRead}
}

// match sets the failure and commit-then-fail steps of the plan's rules
// that match c.
func (pl *plan) match(c *Call) {
	pl.fail, pl.commitThenFail = nil, false
	for _, r := range pl.rules {
		if !r.matches(*c) {
			continue
		}
		if r.commitThenFail {
			pl.commitThenFail = true
		} else if pl.fail == nil {
			pl.fail = fmt.Errorf("storetest: %s: %w", c.describe(), r.err)
		}
	}
}

// enter runs the delay and failure steps of a call; a non-nil error ends
// the call without reaching the inner store.
func (pl *plan) enter(ctx context.Context, c *Call) error {
	if pl.delay > 0 {
		if err := clock.Sleep(ctx, pl.delay); err != nil {
			return fmt.Errorf("storetest: %s ended during its %v delay: %w: %w", c.describe(), pl.delay, store.ErrUnavailable, err)
		}
	}
	return pl.fail
}

// leaveRead runs the AfterRead hooks of a read the inner store answered.
func (pl *plan) leaveRead(ctx context.Context, c *Call) error {
	for _, hook := range pl.afterRead {
		if err := hook(ctx, *c); err != nil {
			return fmt.Errorf("storetest: AfterRead hook of %s: %w", c.describe(), err)
		}
	}
	return nil
}

// Get implements store.Store.
func (f *Faults) Get(ctx context.Context, p store.Partition, key store.Key) (store.Value, bool, error) {
	c := Call{Method: MethodGet, Partition: p, Key: key}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return nil, false, err
	}
	v, ok, err := f.inner.Get(ctx, p, key)
	if err != nil {
		return v, ok, err
	}
	if err := pl.leaveRead(ctx, &c); err != nil {
		return nil, false, err
	}
	return v, ok, nil
}

// GetMany implements store.Store.
func (f *Faults) GetMany(ctx context.Context, p store.Partition, keys []store.Key) ([]store.Value, error) {
	c := Call{Method: MethodGetMany, Partition: p, Keys: keys}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return nil, err
	}
	vs, err := f.inner.GetMany(ctx, p, keys)
	if err != nil {
		return vs, err
	}
	if err := pl.leaveRead(ctx, &c); err != nil {
		return nil, err
	}
	return vs, nil
}

// Scan implements store.Store.
func (f *Faults) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	c := Call{Method: MethodScan, Partition: p, Start: start, End: end, After: after, Limit: limit}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return store.ScanPage{}, err
	}
	page, err := f.inner.Scan(ctx, p, start, end, after, limit)
	if err != nil {
		return page, err
	}
	if err := pl.leaveRead(ctx, &c); err != nil {
		return store.ScanPage{}, err
	}
	return page, nil
}

// AppendScan implements store.ScanAppender. It is counted, delayed,
// failed and hooked as a Scan (MethodScan), so that code reading through
// either method sees the same faults; an inner store that is not a
// store.ScanAppender is read with Scan and its page copied into rows and
// buf.
func (f *Faults) AppendScan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int, rows []store.KeyValue, buf []byte) (store.ScanPage, []byte, error) {
	c := Call{Method: MethodScan, Partition: p, Start: start, End: end, After: after, Limit: limit}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return store.ScanPage{}, buf, err
	}
	var (
		page store.ScanPage
		out  []byte
		err  error
	)
	if sa, ok := f.inner.(store.ScanAppender); ok {
		page, out, err = sa.AppendScan(ctx, p, start, end, after, limit, rows, buf)
	} else if page, err = f.inner.Scan(ctx, p, start, end, after, limit); err == nil {
		page.Entries, out = appendRows(rows, buf, page.Entries)
	}
	if err != nil {
		return store.ScanPage{}, buf, err
	}
	if err := pl.leaveRead(ctx, &c); err != nil {
		return store.ScanPage{}, buf, err
	}
	return page, out, nil
}

// appendRows appends copies of src to dst, their bytes to buf, each key
// and value capped, as a store.ScanAppender does. buf grows once, before
// the first copy, so that every copy lies in the buf returned.
func appendRows(dst []store.KeyValue, buf []byte, src []store.KeyValue) ([]store.KeyValue, []byte) {
	n := 0
	for _, r := range src {
		n += len(r.Key) + len(r.Value)
	}
	buf = slices.Grow(buf, n)
	for _, r := range src {
		k := len(buf)
		buf = append(buf, r.Key...)
		v := len(buf)
		buf = append(buf, r.Value...)
		dst = append(dst, store.KeyValue{Key: buf[k:v:v], Value: buf[v:len(buf):len(buf)]})
	}
	return dst, buf
}

// Apply implements store.Store.
func (f *Faults) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	return f.apply(ctx, p, b, func() (store.BatchOutcome, error) { return f.inner.Apply(ctx, p, b) })
}

// apply runs an Apply's steps around inner, the inner store's call.
func (f *Faults) apply(ctx context.Context, p store.Partition, b *store.Batch, inner func() (store.BatchOutcome, error)) (store.BatchOutcome, error) {
	c := Call{Method: MethodApply, Partition: p, Batch: b}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return store.BatchOutcome{}, err
	}
	for _, hook := range pl.beforeApply {
		if err := hook(ctx, p, b); err != nil {
			return store.BatchOutcome{}, fmt.Errorf("storetest: BeforeApply hook of %s: %w", c.describe(), err)
		}
	}
	out, err := inner()
	if err == nil && pl.commitThenFail && out.Committed() {
		return store.BatchOutcome{}, fmt.Errorf("storetest: %s committed, result withheld: %w", c.describe(), store.ErrUnknownResult)
	}
	return out, err
}

// Capabilities implements store.Store; it is neither counted nor faulted.
func (f *Faults) Capabilities() store.Capabilities { return f.inner.Capabilities() }

// Stats implements store.Store.
func (f *Faults) Stats(ctx context.Context, p store.Partition) (store.PartitionStats, error) {
	c := Call{Method: MethodStats, Partition: p}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return store.PartitionStats{}, err
	}
	return f.inner.Stats(ctx, p)
}

// Probe implements store.Store.
func (f *Faults) Probe(ctx context.Context) error {
	c := Call{Method: MethodProbe}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return err
	}
	return f.inner.Probe(ctx)
}

// ScanDue implements store.DueIndex by forwarding to the inner store.
func (f *Faults) ScanDue(ctx context.Context, q store.DueQuery) ([]store.DueEntry, error) {
	c := Call{Method: MethodScanDue, Until: q.Until, AfterDue: q.After, Limit: q.Limit, Due: q}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return nil, err
	}
	di, err := f.dueIndex(&c)
	if err != nil {
		return nil, err
	}
	es, err := di.ScanDue(ctx, q)
	if err != nil {
		return es, err
	}
	if err := pl.leaveRead(ctx, &c); err != nil {
		return nil, err
	}
	return es, nil
}

// NextWake implements store.DueIndex by forwarding to the inner store.
func (f *Faults) NextWake(ctx context.Context, p store.Partition) (time.Time, bool, error) {
	c := Call{Method: MethodNextWake, Partition: p}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return time.Time{}, false, err
	}
	di, err := f.dueIndex(&c)
	if err != nil {
		return time.Time{}, false, err
	}
	at, ok, err := di.NextWake(ctx, p)
	if err != nil {
		return at, ok, err
	}
	if err := pl.leaveRead(ctx, &c); err != nil {
		return time.Time{}, false, err
	}
	return at, ok, nil
}

// DueBuckets implements store.DueIndex: the inner store's buckets, 1 when
// it keeps no due index (whose ScanDue then fails).
func (f *Faults) DueBuckets() int {
	if di, ok := f.inner.(store.DueIndex); ok {
		return di.DueBuckets()
	}
	return 1
}

// OverlapsCalls implements store.Overlapping: the inner store's answer
// (false when it is not Overlapping). A Delay does not change it.
func (f *Faults) OverlapsCalls() bool { return store.OverlapsCalls(f.inner) }

func (f *Faults) dueIndex(c *Call) (store.DueIndex, error) {
	di, ok := f.inner.(store.DueIndex)
	if !ok {
		return nil, fmt.Errorf("storetest: %s: %w: the inner store keeps no due index", c.describe(), store.ErrInvalid)
	}
	return di, nil
}

var (
	_ store.Store        = (*Faults)(nil)
	_ store.DueIndex     = (*Faults)(nil)
	_ store.ScanAppender = (*Faults)(nil)
)
