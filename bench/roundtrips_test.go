package bench

import (
	"context"
	"sync/atomic"

	"github.com/mkit-dev/mkitfdb/fdblayer"
)

// countingEngine counts what an engine's transactions wait for on a
// FoundationDB cluster, each a round trip: transactions begun (a read
// version each), reads (a batch of point reads issued together is one,
// as is a range read) and commits that write (one without writes returns
// at once). The MVCC engine's injected latency falls on exactly these.
type countingEngine struct {
	fdblayer.Engine
	begins, reads, commits atomic.Uint64
}

// roundTrips is a snapshot of a countingEngine's counts.
type roundTrips struct{ begins, reads, commits uint64 }

func (c *countingEngine) snapshot() roundTrips {
	return roundTrips{c.begins.Load(), c.reads.Load(), c.commits.Load()}
}

func (r roundTrips) sub(o roundTrips) roundTrips {
	return roundTrips{r.begins - o.begins, r.reads - o.reads, r.commits - o.commits}
}

func (r roundTrips) total() uint64 { return r.begins + r.reads + r.commits }

func (c *countingEngine) Begin(ctx context.Context) (fdblayer.Txn, error) {
	c.begins.Add(1)
	t, err := c.Engine.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &countingTxn{countingReadTxn: countingReadTxn{ReadTxn: t, c: c}, txn: t}, nil
}

func (c *countingEngine) BeginRead(ctx context.Context) (fdblayer.ReadTxn, error) {
	c.begins.Add(1)
	t, err := c.Engine.BeginRead(ctx)
	if err != nil {
		return nil, err
	}
	return &countingReadTxn{ReadTxn: t, c: c}, nil
}

// countingReadTxn counts a transaction's reads, and its retries as
// transactions begun.
type countingReadTxn struct {
	fdblayer.ReadTxn
	c *countingEngine
}

func (t *countingReadTxn) GetMany(dst [][]byte, keys [][]byte) ([][]byte, error) {
	t.c.reads.Add(1)
	return t.ReadTxn.GetMany(dst, keys)
}

func (t *countingReadTxn) GetRange(dst []fdblayer.KeyValue, begin, end []byte, limit int) ([]fdblayer.KeyValue, error) {
	t.c.reads.Add(1)
	return t.ReadTxn.GetRange(dst, begin, end, limit)
}

// OnError resets the transaction to a fresh snapshot: a retry begins
// again.
func (t *countingReadTxn) OnError(err error) error {
	if err := t.ReadTxn.OnError(err); err != nil {
		return err
	}
	t.c.begins.Add(1)
	return nil
}

// countingTxn counts, besides, the commits that write.
type countingTxn struct {
	countingReadTxn
	txn    fdblayer.Txn
	writes bool
}

func (t *countingTxn) Set(key, value []byte) { t.writes = true; t.txn.Set(key, value) }

func (t *countingTxn) Clear(key []byte) { t.writes = true; t.txn.Clear(key) }

func (t *countingTxn) Commit() error {
	if t.writes {
		t.c.commits.Add(1)
	}
	return t.txn.Commit()
}

// OnError also drops the writes, as the reset does.
func (t *countingTxn) OnError(err error) error {
	if err := t.countingReadTxn.OnError(err); err != nil {
		return err
	}
	t.writes = false
	return nil
}
