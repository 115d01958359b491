package fdblayer

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

var _ store.Committer = (*Layer)(nil)

// unit is one batch of a commit, prepared: its partition and batch, its
// partition's subspace and its preconditions' engine keys (see
// batchKeys), in a scratch of its own; and, once decided, the wake time
// it changes.
type unit struct {
	p         store.Partition
	b         *store.Batch
	sub       []byte
	pre       [][]byte
	s         *scratch
	cur, next wake
}

// prepare builds the units of batches, which passed ValidateCommit. The
// caller releases them (release) when done.
func (l *Layer) prepare(batches []store.PartitionBatch) ([]unit, error) {
	units := make([]unit, len(batches))
	for i, pb := range batches {
		s := l.getScratch()
		sub, pre, err := l.batchKeys(s, pb.Partition, pb.Batch)
		units[i] = unit{p: pb.Partition, b: pb.Batch, sub: sub, pre: pre, s: s}
		if err != nil {
			l.release(units[:i+1])
			return nil, fmt.Errorf("fdblayer: commit batch %d: %w", i, err)
		}
	}
	return units, nil
}

// release returns the units' scratch buffers.
func (l *Layer) release(units []unit) {
	for i := range units {
		if units[i].s != nil {
			l.putScratch(units[i].s)
			units[i].s = nil
		}
	}
}

// Commit implements store.Committer: the batches of distinct partitions
// in one engine transaction (one FoundationDB transaction, one bbolt
// write transaction, one step of the memory and MVCC engines), every
// precondition read with one GetMany and checked at the snapshot the
// writes commit on, every batch's Wakeup applied to its partition's wake
// time and due index entry as Apply applies it. The first batch whose
// deadline passed (on the Layer's clock, at the start of an attempt) or
// whose precondition failed decides the commit, with nothing written.
// Retries, unknown results and errors are Apply's, named after the first
// batch's partition. On a kv.GroupCommitter engine the commit joins a
// group commit (see Config.MaxGroupBatches), still all or nothing.
//
// It fails with store.ErrInvalid before any I/O as
// store.Capabilities.ValidateCommit says, and for a key starting with
// 0xFF, and as Apply does while the Layer's gate is fenced. Safe for concurrent use; it neither retains nor modifies the
// batches.
func (l *Layer) Commit(ctx context.Context, batches []store.PartitionBatch) (store.CommitOutcome, error) {
	if err := l.caps.ValidateCommit(batches); err != nil {
		return store.CommitOutcome{}, fmt.Errorf("fdblayer: commit: %w", err)
	}
	first := batches[0].Partition
	if len(batches) == 1 && l.group == nil {
		out, err := l.Apply(ctx, first, batches[0].Batch)
		return oneOutcome(out, first), err
	}
	units, err := l.prepare(batches)
	if err != nil {
		return store.CommitOutcome{}, err
	}
	defer l.release(units)
	if err := l.notNested(ctx, "commit to", first); err != nil {
		return store.CommitOutcome{}, err
	}
	if err := l.fenced(ctx, "commit to", first); err != nil {
		return store.CommitOutcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.CommitOutcome{}, l.opError("commit to", first, nil, err)
	}
	if l.group != nil {
		return l.group.submit(ctx, units)
	}
	txn, err := l.engine.Begin(ctx)
	if err != nil {
		return store.CommitOutcome{}, l.opError("commit to", first, nil, err)
	}
	defer txn.Close()
	var unknown error
	for attempt := 0; ; attempt++ {
		out, committing, err := l.commitUnits(ctx, txn, units, nil)
		if err == nil {
			if out.Outcome == store.DeadlinePassed && unknown != nil {
				return out, l.opError("commit to", first, unknown, fmt.Errorf("deadline passed at %v on a retry", out.Now))
			}
			return out, nil
		}
		if err := l.giveUp(ctx, txn, "commit to", first, attempt, committing, err, &unknown); err != nil {
			return store.CommitOutcome{}, err
		}
	}
}

// oneOutcome is a single batch's outcome as a commit's.
func oneOutcome(out store.BatchOutcome, p store.Partition) store.CommitOutcome {
	co := store.CommitOutcome{BatchOutcome: out}
	if out.Outcome == store.PreconditionFailed || out.Outcome == store.DeadlinePassed {
		co.Partition = p
	}
	return co
}

// commitUnits runs one attempt of a commit of units in txn: decide, then
// write and commit. known, when not nil, holds for each unit what its
// partition's reads in txn found (see TransactManyOnce). committing
// reports that err came from Commit.
func (l *Layer) commitUnits(ctx context.Context, txn kv.Txn, units []unit, known []*readCache) (out store.CommitOutcome, committing bool, err error) {
	if out, err = l.decide(txn, units, known, nil, nil); err != nil || !out.Committed() {
		return out, false, err
	}
	l.writeUnits(txn, units)
	if err := ctx.Err(); err != nil {
		return out, false, err
	}
	if err := txn.Commit(); err != nil {
		return out, true, err
	}
	return out, false, nil
}

// decide checks units at txn's snapshot, as seen through ov (writes made
// earlier in a group commit; nil: none): the deadlines, then every
// precondition, read with one GetMany of the keys neither ov nor known
// holds. It returns the first unit's failure, or Committed with each
// unit's wake change (cur, next) set. vals is scratch (nil: allocated).
func (l *Layer) decide(txn kv.ReadTxn, units []unit, known []*readCache, ov *overlay, vals *[][]byte) (store.CommitOutcome, error) {
	for i := range units {
		if d := units[i].b.Deadline; !d.IsZero() {
			if now := l.clock.Now(); now.After(d) {
				return store.CommitOutcome{BatchOutcome: store.BatchOutcome{Outcome: store.DeadlinePassed, Now: now}, Index: i, Partition: units[i].p}, nil
			}
		}
	}
	wakes := false
	for i := range units {
		wakes = wakes || units[i].b.Wakeup != nil
	}
	if wakes {
		if err := l.probeV1(txn); err != nil {
			return store.CommitOutcome{}, err
		}
	}
	var buf [][]byte
	if vals != nil {
		buf = (*vals)[:0]
	}
	buf, err := readUnits(txn, units, known, ov, buf)
	if vals != nil {
		*vals = buf
	}
	if err != nil {
		return store.CommitOutcome{}, err
	}
	for i := range units {
		u := &units[i]
		v := buf[:len(u.pre)]
		buf = buf[len(u.pre):]
		out, ok, err := checkPreconditions(u.b, v)
		if err != nil {
			return store.CommitOutcome{}, fmt.Errorf("%s: %w", store.PartitionName(u.p), err)
		}
		if !ok {
			return store.CommitOutcome{BatchOutcome: out, Index: i, Partition: u.p}, nil
		}
		u.cur, u.next = wake{}, wake{}
		if u.b.Wakeup != nil {
			if u.cur.at, u.cur.ceil, err = decodeWake(v[wakeRead(u.b)]); err != nil {
				return store.CommitOutcome{}, fmt.Errorf("%s: %w", store.PartitionName(u.p), err)
			}
			u.next.at, u.next.ceil = u.b.Wakeup.NextEncoded(u.cur.at, u.cur.ceil)
		}
	}
	return store.CommitOutcome{BatchOutcome: store.BatchOutcome{Outcome: store.Committed}}, nil
}

// readUnits appends to dst the values of every unit's precondition keys,
// unit after unit: from ov when it holds the key, else from the unit's
// known reads, else read in txn, all those in one GetMany.
func readUnits(txn kv.ReadTxn, units []unit, known []*readCache, ov *overlay, dst [][]byte) ([][]byte, error) {
	n := len(dst)
	var missing [][]byte
	var at []int
	for i := range units {
		for _, k := range units[i].pre {
			if v, ok := ov.get(k); ok {
				dst = append(dst, v)
				continue
			}
			if known != nil && known[i] != nil {
				if j := known[i].find(k); j >= 0 {
					dst = append(dst, known[i].vals[j])
					continue
				}
			}
			missing, at = append(missing, k), append(at, len(dst))
			dst = append(dst, nil)
		}
	}
	return readMissing(txn, dst, n, missing, at)
}

// checkPreconditions checks b's preconditions against vals, their keys'
// values (see batchKeys): ok, or the outcome naming the first that fails.
// It fails with store.ErrCorrupt for a wake time that does not decode.
func checkPreconditions(b *store.Batch, vals [][]byte) (out store.BatchOutcome, ok bool, err error) {
	for i, c := range b.Preconditions {
		holds := false
		if c.Op == store.MustWakeAt {
			at, _, err := decodeWake(vals[i])
			if err != nil {
				return out, false, err
			}
			holds = at == encodedTime(c.Wake)
		} else {
			holds = c.Holds(vals[i])
		}
		if !holds {
			return store.BatchOutcome{Outcome: store.PreconditionFailed, Failed: c, FailedIndex: i}, false, nil
		}
	}
	return out, true, nil
}

// writeUnits sets, in txn, every unit's writes and wake change.
func (l *Layer) writeUnits(txn kv.Txn, units []unit) {
	for i := range units {
		u := &units[i]
		key := append(u.s.key[:0], u.sub...)
		for _, w := range u.b.Writes {
			key = append(key[:len(u.sub)], w.Key...)
			switch w.Op {
			case store.OpPut:
				txn.Set(key, w.Value)
			case store.OpDelete:
				txn.Clear(key)
			}
		}
		if u.b.Wakeup != nil {
			key = l.setWake(txn, u.sub, key, u.cur, u.next)
		}
		u.s.key = key
	}
}

// TransactManyOnce implements store.Committer: fn runs in one engine
// transaction with a store.Reader (and store.WakeReader) per partition,
// each as TransactOnce's (its reads at the transaction's snapshot, kept
// so that a precondition on a key read costs no read, bounded by
// MaxScanBytes a page and by MaxTransactReadBytes for each partition's
// reads of a run), and the batches it returns commit in the same
// transaction as Commit commits them. A read another writer changes
// before the commit makes fn run again (on the MVCC engine and
// FoundationDB; the memory and bbolt engines let no writer in between),
// within the retry limit. It fails as TransactOnce does, and with
// store.ErrInvalid for no partition, a partition named twice, or batches
// that fail store.Capabilities.ValidateCommit (nothing written).
func (l *Layer) TransactManyOnce(ctx context.Context, ps []store.Partition, fn store.TransactManyFunc) (store.CommitOutcome, error) {
	if fn == nil || len(ps) == 0 {
		return store.CommitOutcome{}, fmt.Errorf("fdblayer: transact many: %w: nil function or no partition", store.ErrInvalid)
	}
	readers := make([]*txnReader, len(ps))
	rs := make([]store.Reader, len(ps))
	seen := make(map[string]int, len(ps))
	for i, p := range ps {
		sub, err := l.appendSubspace(nil, p)
		if err != nil {
			return store.CommitOutcome{}, fmt.Errorf("fdblayer: transact many: %w", err)
		}
		if j, dup := seen[string(sub)]; dup {
			return store.CommitOutcome{}, fmt.Errorf("fdblayer: transact many: %w: partitions %d and %d are one, %s", store.ErrInvalid, j, i, store.PartitionName(p))
		}
		seen[string(sub)] = i
		readers[i] = &txnReader{l: l, p: p, sub: sub}
		rs[i] = readers[i]
	}
	first := ps[0]
	if err := l.notNested(ctx, "transact on", first); err != nil {
		return store.CommitOutcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.CommitOutcome{}, l.opError("transact on", first, nil, err)
	}
	txn, err := l.engine.Begin(ctx)
	if err != nil {
		return store.CommitOutcome{}, l.opError("transact on", first, nil, err)
	}
	defer txn.Close()
	for _, r := range readers {
		r.txn, r.s = txn, l.getScratch()
		r.cache = &r.s.cache
		defer l.putScratch(r.s)
	}
	fnCtx := context.WithValue(ctx, heldTxnKey{}, l)
	var unknown error
	for attempt := 0; ; attempt++ {
		for _, r := range readers {
			r.open()
		}
		bs, fnErr := fn(fnCtx, rs)
		err := fnErr
		var readErr error
		for _, r := range readers {
			if e := r.close(); e != nil && readErr == nil {
				readErr = e // an engine error of fn's reads: retry
			}
		}
		committing := false
		if readErr != nil {
			err = readErr
		} else if fnErr != nil {
			return store.CommitOutcome{}, fnErr
		} else {
			var (
				out  store.CommitOutcome
				done bool
			)
			out, committing, done, err = l.commitMany(ctx, txn, ps, bs, readers)
			switch {
			case done:
				return out, err
			case err == nil && out.Outcome == store.DeadlinePassed && unknown != nil:
				return out, l.opError("transact on", first, unknown, fmt.Errorf("deadline passed at %v on a retry", out.Now))
			case err == nil:
				return out, nil
			}
		}
		if err := l.giveUp(ctx, txn, "transact on", first, attempt, committing, err, &unknown); err != nil {
			return store.CommitOutcome{}, err
		}
	}
}

// commitMany checks and commits, in txn, the batches bs a
// TransactManyOnce function returned for ps, whose readers hold what it
// read. done reports an outcome or error that ends the call (nothing to
// write, or batches that are invalid): nothing to retry.
func (l *Layer) commitMany(ctx context.Context, txn kv.Txn, ps []store.Partition, bs []*store.Batch, readers []*txnReader) (out store.CommitOutcome, committing, done bool, err error) {
	batches, at, err := store.CommitBatches(ps, bs)
	if err == nil && len(batches) > 0 {
		err = l.caps.ValidateCommit(batches)
	}
	if err != nil {
		return out, false, true, fmt.Errorf("fdblayer: transact many: %w", err)
	}
	if len(batches) == 0 {
		return out, false, true, nil
	}
	if err := l.fenced(ctx, "transact on", batches[0].Partition); err != nil {
		return out, false, true, err
	}
	units, err := l.prepare(batches)
	if err != nil {
		return out, false, true, err
	}
	defer l.release(units)
	known := make([]*readCache, len(units))
	for i, j := range at {
		known[i] = readers[j].cache
	}
	out, committing, err = l.commitUnits(ctx, txn, units, known)
	if err == nil && !out.Committed() {
		out.Index = at[out.Index]
	}
	return out, committing, false, err
}
