package outcome

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: where a receiver remembers what it accepted.
//
// A Receiver refuses a request whose key (its nonce, or its Standard
// Webhooks message id) a NonceStore holds. MemoryNonceStore holds them in
// the process: right for one receiving process, and enough when a replay
// reaching a restarted process or another replica is harmless because
// the handler deduplicates by Envelope.ID anyway. PartitionNonceStore
// holds them in a partition of the store the receiving service names, so
// that every replica behind a load balancer, and a restarted one, refuses
// a replay any of them accepted; it costs a commit per request. Each
// claim is one guarded batch: Absent of the key's ReceiverNonceKey row,
// which it puts with the claim's expiry and a random token, beside a
// ReceiverNonceExpiryKey index row; two replicas racing on one request
// commit one claim, and the other finds the row and refuses. After an
// unknown commit result the claim re-reads the row and knows its own by
// the token, so it is neither lost nor refused as its own replay. An
// expired row is taken over (its delete guarded by its value), never
// counted as a replay. Every SweepEvery claims an instance sweeps: it
// deletes up to a batch of expired rows with their index rows, each
// delete guarded by the value the index row holds, so that the partition
// holds what is unexpired and a bounded remainder, never a growing
// history. Replicas sharing a store must share the window configuration
// (MaxSkew, MaxValidity, Tolerance): a key's expiry is computed by the
// replica that claims it.

// Defaults and bounds of the nonce stores.
const (
	// DefaultMaxNonces bounds the keys a MemoryNonceStore holds.
	DefaultMaxNonces = 100_000
	// MaxNonceKeyBytes bounds a NonceStore key.
	MaxNonceKeyBytes = gen.MaxReceiverNonceKeyKey
	// DefaultSweepEvery is how many claims of a PartitionNonceStore
	// instance come between two of its sweeps.
	DefaultSweepEvery = 8
	// sweepScanRows bounds the rows one sweep reads, sweepRows those it
	// deletes (three operations each: a guard and two deletes).
	sweepScanRows = 64
	sweepRows     = 32
)

// NonceStore remembers the keys of the requests a Receiver accepted
// until they expire, so that it accepts each at most once. Both methods
// are safe for concurrent use.
type NonceStore interface {
	// Claim records key until until, unless the store holds it already
	// with an expiry not before now. It fails with an error wrapping
	// ErrReplayed when it does, ErrRejected when until is before now,
	// store.ErrInvalid for a key of 0 or more than MaxNonceKeyBytes
	// bytes, and ErrBusy or another error when it cannot tell (full, the
	// store unavailable): the Receiver then refuses the request, and
	// never accepts one unchecked.
	Claim(ctx context.Context, key string, until, now time.Time) (NonceClaim, error)
	// Release forgets c's key, so that a later request bearing it is
	// accepted; a record of the key made by another claim since is kept.
	// Releasing a claim no longer held is not an error.
	Release(ctx context.Context, c NonceClaim) error
}

// NonceClaim is a key a NonceStore recorded: the key, its expiry, and the
// token that tells this claim's record from another of the same key.
type NonceClaim struct {
	Key   string
	Until time.Time
	Token uint64
}

func checkClaim(key string, until, now time.Time) error {
	switch {
	case len(key) == 0 || len(key) > MaxNonceKeyBytes:
		return fmt.Errorf("outcome: nonce key of %d bytes, want 1 to %d: %w", len(key), MaxNonceKeyBytes, store.ErrInvalid)
	case until.Before(now):
		// What expired cannot be remembered; a request bearing it is
		// outside its window.
		return fmt.Errorf("%w: nonce expired %v ago", ErrRejected, now.Sub(until))
	}
	return nil
}

// MemoryNonceStore is a NonceStore in memory, for one receiving process
// ([PartitionNonceStore] serves several). It holds at most its bound of
// unexpired keys; a claim beyond it fails with ErrBusy until some expire.
type MemoryNonceStore struct {
	mu    sync.Mutex
	max   int
	next  uint64
	seen  map[string]*nonceEntry
	byExp nonceHeap
}

// MemoryNonceStoreConfig configures a MemoryNonceStore. A zero field
// takes its default.
type MemoryNonceStoreConfig struct {
	// MaxNonces bounds the unexpired keys the store holds (default
	// DefaultMaxNonces; a count below 1 means the default).
	MaxNonces int
}

// NewMemoryNonceStore returns an empty store configured by c.
func NewMemoryNonceStore(c MemoryNonceStoreConfig) *MemoryNonceStore {
	max := c.MaxNonces
	if max < 1 {
		max = DefaultMaxNonces
	}
	return &MemoryNonceStore{max: max, seen: make(map[string]*nonceEntry)}
}

// Claim implements NonceStore; it never blocks on I/O.
func (s *MemoryNonceStore) Claim(_ context.Context, key string, until, now time.Time) (NonceClaim, error) {
	if err := checkClaim(key, until, now); err != nil {
		return NonceClaim{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.byExp) > 0 && s.byExp[0].until.Before(now) {
		delete(s.seen, heap.Pop(&s.byExp).(*nonceEntry).key)
	}
	if _, dup := s.seen[key]; dup {
		return NonceClaim{}, fmt.Errorf("%w: key seen before", ErrReplayed)
	}
	if len(s.seen) >= s.max {
		return NonceClaim{}, fmt.Errorf("%w: %d unexpired nonces remembered", ErrBusy, len(s.seen))
	}
	s.next++
	e := &nonceEntry{key: key, until: until, token: s.next}
	s.seen[key] = e
	heap.Push(&s.byExp, e)
	return NonceClaim{Key: key, Until: until, Token: e.token}, nil
}

// Release implements NonceStore.
func (s *MemoryNonceStore) Release(_ context.Context, c NonceClaim) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.seen[c.Key]; ok && e.token == c.Token {
		heap.Remove(&s.byExp, e.index)
		delete(s.seen, c.Key)
	}
	return nil
}

// Len reports how many keys the store holds, expired ones not yet
// evicted among them.
func (s *MemoryNonceStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

type nonceEntry struct {
	key   string
	until time.Time
	token uint64
	index int // in the heap
}

// nonceHeap orders entries by expiry (container/heap).
type nonceHeap []*nonceEntry

func (h nonceHeap) Len() int           { return len(h) }
func (h nonceHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h nonceHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *nonceHeap) Push(x any) {
	e := x.(*nonceEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *nonceHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// PartitionNonceStoreConfig configures a PartitionNonceStore. Store and
// Partition are required.
type PartitionNonceStoreConfig struct {
	// Store holds the rows.
	Store store.Store
	// Partition is the receiving service's partition the rows are kept
	// in (key classes gen.ReceiverNonceKey and gen.ReceiverNonceExpiryKey,
	// in the library's range, clear of the service's own).
	Partition store.Partition
	// SweepEvery is how many claims of this instance come between two of
	// its sweeps (default DefaultSweepEvery); negative: it never sweeps by
	// itself, and the service calls Sweep.
	SweepEvery int
	// Logger logs failed sweeps (nil: slog.Default()).
	Logger *slog.Logger
}

// PartitionNonceStore is a NonceStore kept in a partition of a store, for
// receivers running as several replicas or restarting: every instance over
// the same partition refuses a key any of them claimed, and two racing on
// one key commit one claim. Each claim costs one commit, and every
// SweepEvery-th claim of an instance a read and a commit more. It is safe
// for concurrent use.
type PartitionNonceStore struct {
	s      store.Store
	p      store.Partition
	every  int
	log    *slog.Logger
	claims atomic.Uint64
}

// NewPartitionNonceStore returns the store. It fails with an error
// wrapping store.ErrInvalid for a nil Store or a Partition that does not
// encode.
func NewPartitionNonceStore(c PartitionNonceStoreConfig) (*PartitionNonceStore, error) {
	if c.Store == nil || c.Partition == nil {
		return nil, fmt.Errorf("outcome: partition nonce store without a store or partition: %w", store.ErrInvalid)
	}
	if _, err := store.IdentityOf(c.Partition); err != nil {
		return nil, fmt.Errorf("outcome: partition nonce store: %w", err)
	}
	n := &PartitionNonceStore{s: c.Store, p: c.Partition, every: c.SweepEvery, log: c.Logger}
	if n.every == 0 {
		n.every = DefaultSweepEvery
	}
	if n.log == nil {
		n.log = slog.Default()
	}
	return n, nil
}

// Claim implements NonceStore: one guarded batch, re-read and retried as
// store.Transact does when another claim of the key or a sweep raced it.
// A failing store fails it with that store's error (the Receiver answers
// 503); a corrupt row of the key with one wrapping store.ErrCorrupt.
func (n *PartitionNonceStore) Claim(ctx context.Context, key string, until, now time.Time) (NonceClaim, error) {
	if err := checkClaim(key, until, now); err != nil {
		return NonceClaim{}, err
	}
	c := NonceClaim{Key: key, Until: until, Token: rand.Uint64()}
	rowKey, idxKey, value, err := nonceRows(c)
	if err != nil {
		return NonceClaim{}, err
	}
	untilMs, nowMs := unixMs(until), unixMs(now)
	first := true
	_, err = store.Transact(ctx, n.s, n.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		if first {
			// Most keys are new: claim without reading.
			first = false
			return store.NewBatch().Require(store.Absent(rowKey)).Put(rowKey, value).Put(idxKey, value), nil
		}
		cur, ok, err := r.Get(ctx, rowKey)
		if err != nil {
			return nil, err
		}
		if !ok {
			return store.NewBatch().Require(store.Absent(rowKey)).Put(rowKey, value).Put(idxKey, value), nil
		}
		held, err := gen.DecodeReceiverNonceV1(cur)
		switch {
		case err != nil:
			return nil, fmt.Errorf("outcome: nonce row of %d-byte key in %s: %w", len(key), store.PartitionName(n.p), err)
		case held.Token == c.Token && held.UntilMs == untilMs:
			return nil, nil // this claim landed, its result unknown
		case held.UntilMs >= nowMs:
			return nil, fmt.Errorf("%w: key seen before", ErrReplayed)
		}
		oldIdx, err := gen.AppendReceiverNonceExpiryKey(nil, held.UntilMs, key)
		if err != nil {
			return nil, err
		}
		return store.NewBatch().Require(store.Equals(rowKey, cur)).
			Delete(oldIdx).Put(rowKey, value).Put(idxKey, value), nil
	}, store.TransactConfig{})
	if err != nil {
		return NonceClaim{}, err
	}
	if n.every > 0 && n.claims.Add(1)%uint64(n.every) == 0 {
		if _, err := n.Sweep(ctx, now); err != nil {
			n.log.Warn("outcome: nonce sweep failed", "partition", store.PartitionName(n.p), "err", err)
		}
	}
	return c, nil
}

// Release implements NonceStore: it deletes c's row and index row,
// guarded by the row's value, so that a later claim of the key is kept.
func (n *PartitionNonceStore) Release(ctx context.Context, c NonceClaim) error {
	rowKey, idxKey, value, err := nonceRows(c)
	if err != nil {
		return err
	}
	// A failed guard means the claim is no longer held: nothing to do.
	// After an unknown result the batch landed, or may land later, which
	// its guard makes harmless; the caller may release again.
	if _, err := n.s.Apply(ctx, n.p, store.NewBatch().Require(store.Equals(rowKey, value)).Delete(rowKey).Delete(idxKey)); err != nil {
		return fmt.Errorf("outcome: release a nonce claim: %w", err)
	}
	return nil
}

// Sweep deletes up to a batch of rows that expired before now, each with
// its index row, and returns how many it deleted. Claims sweep by
// themselves (PartitionNonceStoreConfig.SweepEvery); a service that turned
// that off calls Sweep from its own loop. A row it cannot parse is left
// in place and reported in an error wrapping store.ErrCorrupt, after the
// others are deleted. It is safe for concurrent use; concurrent sweeps
// and claims race on guards, and the losers re-read.
func (n *PartitionNonceStore) Sweep(ctx context.Context, now time.Time) (int, error) {
	start, _ := gen.ClassRange(gen.TagReceiverNonceExpiryKey)
	end, err := gen.AppendReceiverNonceExpiryKey(nil, unixMs(now), "")
	if err != nil {
		return 0, err
	}
	limit := min(sweepRows, n.s.Capabilities().Full().MaxBatchOps/3)
	deleted := 0
	var corrupt error
	_, err = store.Transact(ctx, n.s, n.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		deleted, corrupt = 0, nil
		page, err := r.Scan(ctx, start, end, nil, sweepScanRows)
		if err != nil {
			return nil, err
		}
		b := store.NewBatch()
		for _, kv := range page.Entries {
			if deleted == limit {
				break
			}
			ik, err := gen.ParseReceiverNonceExpiryKey(kv.Key)
			if err == nil {
				_, err = gen.DecodeReceiverNonceV1(kv.Value)
			}
			if err != nil {
				if corrupt == nil {
					corrupt = fmt.Errorf("outcome: nonce index row %x in %s: %w", []byte(kv.Key), store.PartitionName(n.p), err)
				}
				continue
			}
			rowKey, err := gen.AppendReceiverNonceKey(nil, ik.Key)
			if err != nil {
				return nil, err
			}
			b.Require(store.Equals(rowKey, kv.Value)).Delete(rowKey).Delete(kv.Key)
			deleted++
		}
		return b, nil
	}, store.TransactConfig{})
	if err != nil {
		return 0, fmt.Errorf("outcome: sweep expired nonces: %w", err)
	}
	return deleted, corrupt
}

// nonceRows are the row key, index key and value that hold claim c.
func nonceRows(c NonceClaim) (rowKey, idxKey store.Key, value store.Value, err error) {
	untilMs := unixMs(c.Until)
	if rowKey, err = gen.AppendReceiverNonceKey(nil, c.Key); err != nil {
		return nil, nil, nil, err
	}
	if idxKey, err = gen.AppendReceiverNonceExpiryKey(nil, untilMs, c.Key); err != nil {
		return nil, nil, nil, err
	}
	value, err = gen.EncodeReceiverNonceV1(gen.ReceiverNonceV1{UntilMs: untilMs, Token: c.Token})
	return rowKey, idxKey, value, err
}

// unixMs is t as stored data holds it (store.EncodeTime), 0 before the
// epoch.
func unixMs(t time.Time) uint64 {
	u, _ := store.EncodeTime(t)
	return u
}
