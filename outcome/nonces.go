package outcome

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: where a receiver remembers what it accepted.
//
// A Receiver refuses a request whose keys (package doc: what a request
// claims) a NonceStore holds for its sender. MemoryNonceStore holds them
// in the process: right for one receiving process, and enough when a
// replay reaching a restarted process or another replica is harmless
// because the handler deduplicates by Envelope.ID anyway.
// PartitionNonceStore holds them in a partition of the store the
// receiving service names, so that every replica behind a load balancer,
// and a restarted one, refuses a replay any of them accepted; it costs a
// commit per request. Each claim is one guarded batch: for each of its
// keys, Absent of the key's ReceiverReplayKey row (the sender and the
// key), which it puts with the key's expiry and the claim's random token,
// beside a ReceiverReplayExpiryKey index row, and Absent of the key's row
// of the first layout (ReceiverNonceKey, without a sender), which rows
// written before senders were named still hold until they expire; two
// replicas racing on one request commit one claim, and the other finds
// the row and refuses. After an unknown commit result the claim re-reads
// the rows and knows its own by the token, so it is neither lost nor
// refused as its own replay. An expired row is taken over (its delete
// guarded by its value), never counted as a replay: a key's expiry only
// grows that way, since a receiver accepts a request only before its
// expiry. Every SweepEvery claims an instance sweeps: it deletes up to a
// batch of rows, of either layout, that expired more than MaxReplicaSkew
// ago by its own clock, each with its index row and guarded by the value
// the index row holds, so that the partition holds what is unexpired and
// a bounded remainder, never a growing history.
//
// Why the sweep waits MaxReplicaSkew: a row's expiry is the end of its
// request's window, read on each replica's own clock. A replica whose
// clock runs ahead by d sees the row expire d before one whose clock runs
// behind, which still admits the request; deleting it then would let a
// replay to the slower replica through. A row is therefore deleted only
// once the sweeper's clock is past its expiry by more than the largest
// difference between any two replicas' clocks, whichever runs ahead, and
// no replica within that bound admits the request any more. Replicas
// sharing a store must share the window configuration (MaxSkew,
// MaxValidity, Tolerance) and the sender's name: a key's expiry is
// computed by the replica that claims it.

// Defaults and bounds of the nonce stores.
const (
	// DefaultMaxNonces bounds the keys a MemoryNonceStore holds.
	DefaultMaxNonces = 100_000
	// MaxNonceKeyBytes bounds a NonceStore key.
	MaxNonceKeyBytes = gen.MaxReceiverReplayKeyKey
	// MaxSenderBytes bounds the sender a NonceStore claim names
	// (ReceiverConfig.Sender).
	MaxSenderBytes = gen.MaxReceiverReplayKeySender
	// MaxNonceKeys bounds the keys of one claim.
	MaxNonceKeys = 4
	// DefaultSweepEvery is how many claims of a PartitionNonceStore
	// instance come between two of its sweeps.
	DefaultSweepEvery = 8
	// DefaultMaxReplicaSkew is the difference a PartitionNonceStore
	// allows between the clocks of the replicas sharing it: a sweep keeps
	// a row this long past its expiry.
	DefaultMaxReplicaSkew = time.Minute
	// sweepScanRows bounds the rows one sweep reads of each layout,
	// sweepRows those it deletes (three operations each: a guard and two
	// deletes).
	sweepScanRows = 64
	sweepRows     = 32
)

// NonceStore remembers the keys of the requests a Receiver accepted, per
// sender, until they expire, so that it accepts each at most once. Both
// methods are safe for concurrent use.
type NonceStore interface {
	// Claim records keys for sender, each until its Until, all or none:
	// unless the store holds one of them for sender (or, for a store
	// that kept keys before senders were named, for none) with an expiry
	// not before now. It fails with an error wrapping ErrReplayed when it
	// does, ErrRejected when an Until is before now, store.ErrInvalid for
	// a sender of more than MaxSenderBytes, no keys or more than
	// MaxNonceKeys, a key of 0 or more than MaxNonceKeyBytes bytes or a
	// key twice, and ErrBusy or another error when it cannot tell (full,
	// the store unavailable): the Receiver then refuses the request, and
	// never accepts one unchecked.
	Claim(ctx context.Context, sender string, keys []NonceKey, now time.Time) (NonceClaim, error)
	// Release forgets c's keys, so that a later request bearing them is
	// accepted; a record of a key made by another claim since is kept.
	// Releasing a claim no longer held is not an error.
	Release(ctx context.Context, c NonceClaim) error
}

// NonceKey is one key of a claim, and when it expires: the end of the
// last window in which a receiver may accept a request bearing it.
type NonceKey struct {
	Key   string
	Until time.Time
}

// NonceClaim is what a NonceStore recorded: the sender and keys, and the
// token that tells this claim's record from another of the same keys.
type NonceClaim struct {
	Sender string
	Keys   []NonceKey
	Token  uint64
}

func checkClaim(sender string, keys []NonceKey, now time.Time) error {
	if len(sender) > MaxSenderBytes {
		return fmt.Errorf("outcome: nonce sender of %d bytes, want at most %d: %w", len(sender), MaxSenderBytes, store.ErrInvalid)
	}
	if len(keys) == 0 || len(keys) > MaxNonceKeys {
		return fmt.Errorf("outcome: nonce claim of %d keys, want 1 to %d: %w", len(keys), MaxNonceKeys, store.ErrInvalid)
	}
	for i, k := range keys {
		switch {
		case len(k.Key) == 0 || len(k.Key) > MaxNonceKeyBytes:
			return fmt.Errorf("outcome: nonce key %d of %d bytes, want 1 to %d: %w", i, len(k.Key), MaxNonceKeyBytes, store.ErrInvalid)
		case slices.ContainsFunc(keys[:i], func(o NonceKey) bool { return o.Key == k.Key }):
			return fmt.Errorf("outcome: nonce key %d claimed twice: %w", i, store.ErrInvalid)
		case k.Until.Before(now):
			// What expired cannot be remembered; a request bearing it is
			// outside its window.
			return fmt.Errorf("%w: nonce expired %v ago", ErrRejected, now.Sub(k.Until))
		}
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
	seen  map[senderKey]*nonceEntry
	byExp nonceHeap
}

// senderKey is a key as a sender's.
type senderKey struct{ sender, key string }

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
	return &MemoryNonceStore{max: max, seen: make(map[senderKey]*nonceEntry)}
}

// Claim implements NonceStore; it never blocks on I/O.
func (s *MemoryNonceStore) Claim(_ context.Context, sender string, keys []NonceKey, now time.Time) (NonceClaim, error) {
	if err := checkClaim(sender, keys, now); err != nil {
		return NonceClaim{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.byExp) > 0 && s.byExp[0].until.Before(now) {
		delete(s.seen, heap.Pop(&s.byExp).(*nonceEntry).key)
	}
	for _, k := range keys {
		if _, dup := s.seen[senderKey{sender, k.Key}]; dup {
			return NonceClaim{}, fmt.Errorf("%w: key seen before", ErrReplayed)
		}
	}
	if len(s.seen)+len(keys) > s.max {
		return NonceClaim{}, fmt.Errorf("%w: %d unexpired nonces remembered", ErrBusy, len(s.seen))
	}
	s.next++
	c := NonceClaim{Sender: sender, Keys: slices.Clone(keys), Token: s.next}
	for _, k := range keys {
		e := &nonceEntry{key: senderKey{sender, k.Key}, until: k.Until, token: c.Token}
		s.seen[e.key] = e
		heap.Push(&s.byExp, e)
	}
	return c, nil
}

// Release implements NonceStore.
func (s *MemoryNonceStore) Release(_ context.Context, c NonceClaim) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range c.Keys {
		key := senderKey{c.Sender, k.Key}
		if e, ok := s.seen[key]; ok && e.token == c.Token {
			heap.Remove(&s.byExp, e.index)
			delete(s.seen, key)
		}
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
	key   senderKey
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
	// in (key classes gen.ReceiverReplayKey and gen.ReceiverReplayExpiryKey,
	// and gen.ReceiverNonceKey and gen.ReceiverNonceExpiryKey of the first
	// layout, in the library's range, clear of the service's own).
	Partition store.Partition
	// SweepEvery is how many claims of this instance come between two of
	// its sweeps (default DefaultSweepEvery); negative: it never sweeps by
	// itself, and the service calls Sweep.
	SweepEvery int
	// MaxReplicaSkew bounds the difference between the clocks of the
	// receivers sharing the partition, either way (default
	// DefaultMaxReplicaSkew): a sweep deletes a row only once its clock is
	// past the row's expiry by more, so no sweep lets through a replay
	// that a replica's window still admits. Replicas whose clocks differ
	// by more may accept a replay a faster one swept.
	MaxReplicaSkew time.Duration
	// Logger logs failed sweeps (nil: slog.Default()).
	Logger *slog.Logger
}

// PartitionNonceStore is a NonceStore kept in a partition of a store, for
// receivers running as several replicas or restarting: every instance over
// the same partition refuses a key any of them claimed for a sender, and
// two racing on one key commit one claim. Each claim costs one commit, and
// every SweepEvery-th claim of an instance a read and a commit more. Rows
// of the first layout, written without a sender, refuse their key for any
// sender until they expire, and are swept. It is safe for concurrent use.
type PartitionNonceStore struct {
	s      store.Store
	p      store.Partition
	every  int
	skewMs uint64
	log    *slog.Logger
	claims atomic.Uint64
}

// NewPartitionNonceStore returns the store. It fails with an error
// wrapping store.ErrInvalid for a nil Store, a Partition that does not
// encode, or a negative MaxReplicaSkew.
func NewPartitionNonceStore(c PartitionNonceStoreConfig) (*PartitionNonceStore, error) {
	if c.Store == nil || c.Partition == nil {
		return nil, fmt.Errorf("outcome: partition nonce store without a store or partition: %w", store.ErrInvalid)
	}
	if _, err := store.IdentityOf(c.Partition); err != nil {
		return nil, fmt.Errorf("outcome: partition nonce store: %w", err)
	}
	if c.MaxReplicaSkew < 0 {
		return nil, fmt.Errorf("outcome: partition nonce store MaxReplicaSkew %v, want 0 or more: %w", c.MaxReplicaSkew, store.ErrInvalid)
	}
	n := &PartitionNonceStore{s: c.Store, p: c.Partition, every: c.SweepEvery, log: c.Logger}
	if n.every == 0 {
		n.every = DefaultSweepEvery
	}
	if c.MaxReplicaSkew == 0 {
		c.MaxReplicaSkew = DefaultMaxReplicaSkew
	}
	n.skewMs = uint64(c.MaxReplicaSkew / time.Millisecond)
	if n.log == nil {
		n.log = slog.Default()
	}
	return n, nil
}

// claimRows are the rows that hold one key of a claim: its row and index
// row, their value, and the key's row of the first layout.
type claimRows struct {
	key              string
	untilMs          uint64
	row, idx, legacy store.Key
	value            store.Value
}

// Claim implements NonceStore: one guarded batch, re-read and retried as
// store.Transact does when another claim of a key or a sweep raced it. A
// failing store fails it with that store's error (the Receiver answers
// 503); a corrupt row of a key with one wrapping store.ErrCorrupt.
func (n *PartitionNonceStore) Claim(ctx context.Context, sender string, keys []NonceKey, now time.Time) (NonceClaim, error) {
	if err := checkClaim(sender, keys, now); err != nil {
		return NonceClaim{}, err
	}
	c := NonceClaim{Sender: sender, Keys: slices.Clone(keys), Token: rand.Uint64()}
	rows, err := nonceRows(c)
	if err != nil {
		return NonceClaim{}, err
	}
	nowMs := unixMs(now)
	first := true
	_, err = store.Transact(ctx, n.s, n.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		b := store.NewBatch()
		if first {
			// Most keys are new: claim without reading.
			first = false
			for _, w := range rows {
				b.Require(store.Absent(w.row), store.Absent(w.legacy)).Put(w.row, w.value).Put(w.idx, w.value)
			}
			return b, nil
		}
		for _, w := range rows {
			cur, ok, err := r.Get(ctx, w.row)
			if err != nil {
				return nil, err
			}
			if !ok {
				b.Require(store.Absent(w.row))
			} else {
				held, err := gen.DecodeReceiverNonceV1(cur)
				switch {
				case err != nil:
					return nil, fmt.Errorf("outcome: nonce row of a %d-byte key in %s: %w", len(w.key), store.PartitionName(n.p), err)
				case held.Token == c.Token && held.UntilMs == w.untilMs:
					return nil, nil // this claim landed (all of it), its result unknown
				case held.UntilMs >= nowMs:
					return nil, fmt.Errorf("%w: key seen before", ErrReplayed)
				}
				oldIdx, err := gen.AppendReceiverReplayExpiryKey(nil, held.UntilMs, sender, w.key)
				if err != nil {
					return nil, err
				}
				b.Require(store.Equals(w.row, cur)).Delete(oldIdx)
			}
			if cur, ok, err = r.Get(ctx, w.legacy); err != nil {
				return nil, err
			}
			if !ok {
				b.Require(store.Absent(w.legacy))
			} else {
				held, err := gen.DecodeReceiverNonceV1(cur)
				switch {
				case err != nil:
					return nil, fmt.Errorf("outcome: nonce row of the first layout, of a %d-byte key in %s: %w", len(w.key), store.PartitionName(n.p), err)
				case held.UntilMs >= nowMs:
					return nil, fmt.Errorf("%w: key seen before", ErrReplayed)
				}
				oldIdx, err := gen.AppendReceiverNonceExpiryKey(nil, held.UntilMs, w.key)
				if err != nil {
					return nil, err
				}
				b.Require(store.Equals(w.legacy, cur)).Delete(w.legacy).Delete(oldIdx)
			}
			b.Put(w.row, w.value).Put(w.idx, w.value)
		}
		return b, nil
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

// Release implements NonceStore: it deletes each of c's rows still
// holding c, with its index row, guarded by the row's value, so that a
// later claim of a key is kept.
func (n *PartitionNonceStore) Release(ctx context.Context, c NonceClaim) error {
	rows, err := nonceRows(c)
	if err != nil {
		return err
	}
	// After an unknown result the batch landed, or may land later, which
	// its guards make harmless; the caller may release again.
	_, err = store.Transact(ctx, n.s, n.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		var b *store.Batch
		for _, w := range rows {
			cur, ok, err := r.Get(ctx, w.row)
			if err != nil {
				return nil, err
			}
			if !ok || !bytes.Equal(cur, w.value) {
				continue // no longer held by c
			}
			if b == nil {
				b = store.NewBatch()
			}
			b.Require(store.Equals(w.row, w.value)).Delete(w.row).Delete(w.idx)
		}
		return b, nil
	}, store.TransactConfig{})
	if err != nil {
		return fmt.Errorf("outcome: release a nonce claim: %w", err)
	}
	return nil
}

// sweepClass is one layout of the rows a sweep deletes: its index class,
// the index key a sweep stops at, and the row an index key names.
type sweepClass struct {
	tag gen.Tag
	end func(cutoffMs uint64) (store.Key, error)
	row func(idx store.Key) (store.Key, error)
}

var sweepClasses = []sweepClass{
	{gen.TagReceiverReplayExpiryKey,
		func(cutoffMs uint64) (store.Key, error) {
			return gen.AppendReceiverReplayExpiryKey(nil, cutoffMs, "", "")
		},
		func(idx store.Key) (store.Key, error) {
			k, err := gen.ParseReceiverReplayExpiryKey(idx)
			if err != nil {
				return nil, err
			}
			return gen.AppendReceiverReplayKey(nil, k.Sender, k.Key)
		}},
	{gen.TagReceiverNonceExpiryKey,
		func(cutoffMs uint64) (store.Key, error) { return gen.AppendReceiverNonceExpiryKey(nil, cutoffMs, "") },
		func(idx store.Key) (store.Key, error) {
			k, err := gen.ParseReceiverNonceExpiryKey(idx)
			if err != nil {
				return nil, err
			}
			return gen.AppendReceiverNonceKey(nil, k.Key)
		}},
}

// Sweep deletes up to a batch of rows that expired more than
// MaxReplicaSkew before now, each with its index row, and returns how
// many it deleted. Claims sweep by themselves
// (PartitionNonceStoreConfig.SweepEvery); a service that turned that off calls
// Sweep from its own loop, with its own clock's time. A row it cannot
// parse is left in place and reported in an error wrapping
// store.ErrCorrupt, after the others are deleted. It is safe for
// concurrent use; concurrent sweeps and claims race on guards, and the
// losers re-read.
func (n *PartitionNonceStore) Sweep(ctx context.Context, now time.Time) (int, error) {
	nowMs := unixMs(now)
	if nowMs <= n.skewMs {
		return 0, nil
	}
	cutoffMs := nowMs - n.skewMs // a row expired before it may go
	limit := min(sweepRows, n.s.Capabilities().Full().MaxBatchOps/3)
	deleted := 0
	var corrupt error
	_, err := store.Transact(ctx, n.s, n.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		deleted, corrupt = 0, nil
		b := store.NewBatch()
		for _, class := range sweepClasses {
			if deleted == limit {
				break
			}
			start, _ := gen.ClassRange(class.tag)
			end, err := class.end(cutoffMs)
			if err != nil {
				return nil, err
			}
			page, err := r.Scan(ctx, start, end, nil, sweepScanRows)
			if err != nil {
				return nil, err
			}
			for _, kv := range page.Entries {
				if deleted == limit {
					break
				}
				rowKey, err := class.row(kv.Key)
				if err == nil {
					_, err = gen.DecodeReceiverNonceV1(kv.Value)
				}
				if err != nil {
					if corrupt == nil {
						corrupt = fmt.Errorf("outcome: nonce index row %x in %s: %w", []byte(kv.Key), store.PartitionName(n.p), err)
					}
					continue
				}
				b.Require(store.Equals(rowKey, kv.Value)).Delete(rowKey).Delete(kv.Key)
				deleted++
			}
		}
		return b, nil
	}, store.TransactConfig{})
	if err != nil {
		return 0, fmt.Errorf("outcome: sweep expired nonces: %w", err)
	}
	return deleted, corrupt
}

// nonceRows are the rows that hold claim c's keys.
func nonceRows(c NonceClaim) ([]claimRows, error) {
	rows := make([]claimRows, len(c.Keys))
	for i, k := range c.Keys {
		w := &rows[i]
		w.key, w.untilMs = k.Key, unixMs(k.Until)
		var err error
		if w.row, err = gen.AppendReceiverReplayKey(nil, c.Sender, k.Key); err != nil {
			return nil, err
		}
		if w.idx, err = gen.AppendReceiverReplayExpiryKey(nil, w.untilMs, c.Sender, k.Key); err != nil {
			return nil, err
		}
		if w.legacy, err = gen.AppendReceiverNonceKey(nil, k.Key); err != nil {
			return nil, err
		}
		if w.value, err = gen.EncodeReceiverNonceV1(gen.ReceiverNonceV1{UntilMs: w.untilMs, Token: c.Token}); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// unixMs is t as stored data holds it (store.EncodeTime), 0 before the
// epoch.
func unixMs(t time.Time) uint64 {
	u, _ := store.EncodeTime(t)
	return u
}
