package storetest

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

var _ store.Prefetcher = (*Faults)(nil)

// Prefetch implements store.Prefetcher over any inner store. The read
// ahead is counted, delayed, failed and hooked as a GetMany of keys
// (MethodGetMany): the inner store's Prefetch when it is a
// store.Prefetcher, else its GetMany, whose values nothing uses. The
// Apply of what it returns is an Apply (MethodApply), its inner call the
// inner store's prefetched Apply, or its Apply.
func (f *Faults) Prefetch(ctx context.Context, p store.Partition, keys []store.Key) (store.Prefetched, error) {
	c := Call{Method: MethodGetMany, Partition: p, Keys: keys}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return nil, err
	}
	fp := &faultsPrefetched{f: f, p: p}
	if pf, ok := f.inner.(store.Prefetcher); ok {
		inner, err := pf.Prefetch(ctx, p, keys)
		if err != nil {
			return nil, err
		}
		fp.inner = inner
	} else if _, err := f.inner.GetMany(ctx, p, keys); err != nil {
		return nil, err
	}
	if err := pl.leaveRead(ctx, &c); err != nil {
		fp.Close()
		return nil, err
	}
	return fp, nil
}

// faultsPrefetched is what Faults.Prefetch returns.
type faultsPrefetched struct {
	f       *Faults
	p       store.Partition
	inner   store.Prefetched // nil: the inner store is no Prefetcher
	applied bool
}

func (fp *faultsPrefetched) Apply(ctx context.Context, b *store.Batch) (store.BatchOutcome, error) {
	if fp.applied {
		return store.BatchOutcome{}, fmt.Errorf("storetest: apply to %s: %w: a prefetch applied twice", store.PartitionName(fp.p), store.ErrInvalid)
	}
	fp.applied = true
	return fp.f.apply(ctx, fp.p, b, func() (store.BatchOutcome, error) {
		if fp.inner == nil {
			return fp.f.inner.Apply(ctx, fp.p, b)
		}
		return fp.inner.Apply(ctx, b)
	})
}

func (fp *faultsPrefetched) Close() {
	if fp.inner != nil {
		fp.inner.Close()
	}
}
