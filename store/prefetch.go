package store

import "context"

// Prefetcher is implemented by stores that can read, ahead of a batch,
// the keys its preconditions will check, so that the batch, applied once
// the caller's other work is done, waits for no read of its own: on
// FoundationDB a commit, one round trip, where Apply waits for three (a
// read version, the reads, the commit). The relay reads its first
// checkpoint batch's guards so, beside its target lanes. A store that is
// not a Prefetcher is applied to with Apply.
//
// A prefetch never holds what another transaction waits for, so the
// caller may wait for other calls of the same store in between: where
// transactions exclude one another (the memory and bbolt engines' one
// writer) a prefetch reads nothing and its Apply is Apply; only where
// they never wait for each other (FoundationDB, fdbsim's MVCC engine)
// does it keep the transaction that read, which holds a read version, no
// lock.
type Prefetcher interface {
	// Prefetch reads keys of partition p ahead of a batch, or nothing
	// where reading ahead saves no round trip, and returns what Apply
	// applies that batch with. It fails with ErrInvalid for a key or
	// partition Get would refuse, and as GetMany fails. ctx bounds the
	// prefetch's transaction until Apply or Close: Apply fails once it
	// has ended. The caller must Close what it returns. Safe for
	// concurrent use.
	Prefetch(ctx context.Context, p Partition, keys []Key) (Prefetched, error)
}

// Prefetched is what a Prefetcher read ahead for one batch. It is used by
// one goroutine at a time.
type Prefetched interface {
	// Apply applies b to the prefetch's partition with Store.Apply's
	// outcomes, errors and guarantees: its preconditions are decided on
	// the state it commits on. One on a prefetched key costs no read while
	// nothing wrote that key since the prefetch; when something did, or
	// the prefetch's read version grew too old (FoundationDB's five
	// seconds), the commit conflicts and Apply reads again and decides on
	// what it reads, as Apply retries a conflict. It may be called once;
	// a second call fails with ErrInvalid.
	Apply(ctx context.Context, b *Batch) (BatchOutcome, error)
	// Close ends the prefetch, writing nothing. It is safe after Apply
	// and more than once.
	Close()
}
