package timers

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: schedulers share out the due index's buckets.
//
// The due index is split into buckets (store.DueIndex), and every
// Scheduler lists every bucket at each tick, so that it finds every due
// partition whatever the others do. Schedulers that list in the same
// order race each other for the same entries: each lost race is a claim
// that conflicts or finds the lease taken, a transaction for nothing. So
// each Scheduler starts its listing at a bucket of its own: the Schedulers
// sharing a store keep a membership row each (gen.SchedulerMemberKey in
// MembersPartition, a SchedulerLeaseV1 live for LeaseDuration, renewed
// every quarter of it), read the live ones at each tick, and the one of
// rank r among n (by Owner) starts at bucket r*B/n. Each then lists the
// others' buckets after its own, where it finds what they have not
// claimed yet (a partition they fired has left the index; one they fire
// is parked, listed only with the parked entries), and meets them only
// where one of them is behind. A Scheduler that cannot read the
// memberships starts at a bucket drawn from its Owner and the tick: the
// listing, and so every timer, never depends on them. QuiCK holds its
// queue zones by lease instead; a lease per bucket would cost a commit per
// bucket and tick, and a worker that dies would hold its buckets until the
// lease expired, where here the others list them anyway.

// MembersPartition is the partition that holds the Schedulers'
// memberships (see the design note above). Its identity starts with a
// tuple null, which no schema's partition identity does (they start with
// their namespace), so it shares the store with every schema's partitions.
// It never holds a timer.
var MembersPartition store.Partition = mustMembersPartition()

func mustMembersPartition() store.Identity {
	id := tuple.AppendString(tuple.AppendString(tuple.AppendNull(nil), "mkitfdb"), "schedulers")
	p, err := store.ParseIdentity(id)
	if err != nil {
		panic(fmt.Sprintf("timers: members partition: %v", err))
	}
	return p
}

// maxMemberDeletes bounds the expired memberships one renewal deletes.
const maxMemberDeletes = 16

// members reads the live memberships at nowMs and renews this Scheduler's
// own when a quarter of its life has passed (or it has none), in one
// transaction, and returns this Scheduler's rank among the live members
// (by Owner, itself included) and their number. In the same range read
// it reads the pauses of the whole store (see pause.go), which it keeps
// as the Scheduler's view once the read is whole, even when the renewal
// fails to commit: what one read saw is a snapshot as good as a read-only
// transaction's, and a resume it missed ended the generation it carries,
// which the next tick finds (see pause.go).
func (s *Scheduler) members(ctx context.Context, nowMs uint64) (rank, count int, err error) {
	own, err := gen.AppendSchedulerMemberKey(nil, s.owner)
	if err != nil { // NewScheduler bounds the owner: unreachable
		return 0, 0, err
	}
	_, memberEnd := gen.ClassRange(gen.TagSchedulerMemberKey)
	var (
		live   []string
		pauses Pauses
		read   bool
	)
	_, err = store.TransactOnce(ctx, s.store, MembersPartition, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		live, pauses, read = live[:0], Pauses{}, false
		b := store.NewBatch()
		var mine store.Value
		var after store.Cursor
		for {
			page, err := r.Scan(ctx, membersStart, membersEnd, after, 256)
			if err != nil {
				return nil, fmt.Errorf("read memberships and pauses: %w", err)
			}
			for _, kv := range page.Entries {
				if bytes.Compare(kv.Key, memberEnd) >= 0 {
					if err := pauses.add(kv); err != nil {
						return nil, err
					}
					continue
				}
				m, err := gen.DecodeSchedulerLeaseV1(kv.Value)
				if err != nil {
					s.log.Warn("timers: scheduler: membership does not decode; ignored", "key", fmt.Sprintf("%x", []byte(kv.Key)), "error", err)
					continue
				}
				switch {
				case m.Owner == s.owner:
					mine = kv.Value
				case m.ExpiresAtMs > nowMs:
					live = append(live, m.Owner)
				case len(b.Writes) < maxMemberDeletes:
					b.Require(store.Equals(kv.Key, kv.Value)).Delete(kv.Key)
				}
			}
			if page.Next == nil {
				break
			}
			after = page.Next
		}
		read = true
		renew := mine == nil
		if !renew {
			m, err := gen.DecodeSchedulerLeaseV1(mine)
			renew = err != nil || m.ExpiresAtMs < addMs(nowMs, s.leaseMs-s.leaseMs/4)
		}
		if renew {
			v, err := gen.EncodeSchedulerLeaseV1(gen.SchedulerLeaseV1{Owner: s.owner, ExpiresAtMs: addMs(nowMs, s.leaseMs)})
			if err != nil {
				return nil, err
			}
			b.Require(store.Guard(own, mine)).Put(own, v)
		}
		if len(b.Writes) == 0 {
			return nil, nil
		}
		return b, nil
	})
	if read {
		s.setPauses(pauses)
	}
	if err != nil {
		return 0, 0, err
	}
	live = append(live, s.owner)
	slices.Sort(live)
	return slices.Index(live, s.owner), len(live), nil
}
