package timers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/mkit-dev/mkitfdb/codec/wire"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: pauses.
//
// An operator pauses a timer kind for the whole store (its downstream is
// broken: a carrier's API, a webhook) or one partition's queues (its relay
// and outcome delivery: the timers of the library's kinds, which stand for
// the partition's queues, see Kind.Queue), and resumes it. A pause is a
// row, written and deleted only by PauseKind, ResumeKind, PausePartition
// and ResumePartition, each one guarded batch that records who paused,
// when and why (gen.PauseV1):
//
//	KindPauseKey(kind)    in MembersPartition  ->  PauseV1
//	PauseGenerationKey    in MembersPartition  ->  U64Value (resumes)
//	PartitionPauseKey     in the partition     ->  PauseV1
//
// Where they are read. A kind pause is store-wide, and every Scheduler
// must know it without a read per partition: it lives beside the
// memberships, which each Scheduler reads once per tick in one range read
// of one transaction (see members); a pause takes effect at each
// Scheduler's first tick that reads it (a tick already listing, and a
// fire already running, finish as they began). A partition's pause lives
// in the partition, and the claim reads it with the lease, in the same
// read (no round trip more).
//
// What a Scheduler does with a paused timer: nothing. The run of a claimed
// partition leaves a due timer of a paused kind (or a queue timer of a
// paused partition) where it is, untouched: not fired, not failed, no
// attempt spent, its due time and value kept (Report.Paused counts it).
// It cannot leave the partition's wake time at that timer's due time: the
// partition would stay due and be claimed at every tick for nothing. Nor
// can it set the wake time to the next timer it did not leave: a resume
// would then not find the paused timers until that time (a day, for a
// daily kind), or ever. So the release writes a paused wake time: a time
// in a range of its own, past every wake time a timer sets (the year 146
// million; a timer due later wakes its partition at the range's start,
// earlier, which is always safe), that encodes the pause generation the
// run read and the due time of the partition's next timer the run did
// not leave (see pausedWakeMs):
//
//	pausedBaseMs + (generation mod pausedGens) * pausedSpanMs + next
//
// Each tick lists, beside the due entries, the paused entries that are
// due: those of the current generation whose next timer is due (the
// range from pausedBaseMs to the current generation's now), and those of
// every earlier generation (the same range's start). A resume of a kind
// deletes its pause and raises the generation in one batch, so at every
// Scheduler's next tick every partition a pause left timers in is due:
// claimed, its resumed timers fire once, and timers of kinds still paused
// are left again, under the new generation. A Scheduler that still held
// the old pauses writes the old generation, which its next tick, and
// every other's, lists as due: no resume is lost to a stale view. A
// partition's resume deletes its pause and lowers its wake time to now in
// one batch of the partition, which needs no generation; a release
// guarded on the parked wake time keeps the earlier of the two (see
// finish). A timer written meanwhile lowers a paused wake time to its due
// time like any other, since a paused wake time is later than every due
// time: the partition is then fired at that time and left paused again.
// A generation wraps after pausedGens resumes; the entries of the
// generations after the current one's (from before the wrap) are listed
// with the parked ones, every quarter of the lease.
//
// So the due index invariant becomes (timerstest.CheckDueIndex): every
// partition that holds a timer has a due index entry at or before its
// earliest timer's due time; or a paused one whose generation a resume
// ended (due at the next tick), or of the current generation at or before
// the earliest timer that no current pause holds (the resume raises the
// generation for the others).
//
// What a pause costs: a tick reads the pauses in its membership read (no
// transaction more) and lists the paused entries due (one ScanDue more:
// one round trip), and an idle Run looks for the current generation's
// next paused wake time beside the next wake time (one ScanDue more), so
// that it wakes for a paused partition's next timer as for any other; a
// claim reads the partition's pause beside its lease;
// a partition holding paused timers is claimed once when they fall due,
// when its next other timer falls due, and once after a resume, never at
// every tick. A run reads past the paused due timers it leaves (they are
// rows of the timer class before the others), within its lease.
//
// RunDue alone knows no pause: the Scheduler reads them and tells the
// runs it claims. The library's own queue timers are kinds like any
// other: PauseKind(KindRelay) pauses every relay of the store.

// The paused wake times (see the design note): generations of
// pausedSpanMs milliseconds each from pausedBaseMs, every one below
// math.MaxInt64 - 1, so that a time.Time holds them, and after every
// time a listing of the partitions due reaches.
const (
	pausedBaseMs = uint64(1) << 62
	pausedSpanMs = uint64(1) << 44 // 557 years: a next due time in the year 2527 or later is kept as none
	pausedGens   = (uint64(1)<<62)/pausedSpanMs - 1
	pausedEndMs  = pausedBaseMs + pausedGens*pausedSpanMs
	// pausedNone is the offset of a paused wake time whose partition
	// holds no timer the pause left out.
	pausedNone = pausedSpanMs - 1
)

// realWakeMs is the wake time that stands for a timer due at dueMs: dueMs,
// or, for one in the paused wake times' range or after it, the last
// millisecond before that range (earlier is always safe).
func realWakeMs(dueMs uint64) uint64 { return min(dueMs, pausedBaseMs-1) }

// wakeTime is realWakeMs(dueMs) as a time.
func wakeTime(dueMs uint64) time.Time { return store.DecodeTime(realWakeMs(dueMs)) }

// pausedWakeMs is the paused wake time of a partition left with paused
// timers under generation gen, whose next timer not left is due at nextMs
// (0: none).
func pausedWakeMs(gen, nextMs uint64) uint64 {
	off := nextMs
	if off == 0 || off > pausedNone {
		off = pausedNone
	}
	return pausedBaseMs + gen%pausedGens*pausedSpanMs + off
}

// splitPausedWake splits a paused wake time into its generation's slot
// and its offset; ok is false for any other wake time.
func splitPausedWake(ms uint64) (slot, off uint64, ok bool) {
	if ms < pausedBaseMs || ms >= pausedEndMs {
		return 0, 0, false
	}
	return (ms - pausedBaseMs) / pausedSpanMs, (ms - pausedBaseMs) % pausedSpanMs, true
}

// pausedDue reports whether the paused wake time ms is due at nowMs under
// generation gen: of another generation, or its next timer due.
func pausedDue(ms, gen, nowMs uint64) bool {
	slot, off, ok := splitPausedWake(ms)
	return ok && (slot != gen%pausedGens || off <= nowMs)
}

// Queue reports whether timers of kind k stand for a partition's queues:
// the library's kinds (KindRelay, KindOutcomeDelivery and any it adds),
// which a partition's pause holds (see PausePartition).
func (k Kind) Queue() bool { return k != 0 && k <= MaxLibraryKind }

// The bounds of a pause's texts.
const (
	MaxPauseWho    = gen.MaxPauseV1Who
	MaxPauseReason = gen.MaxPauseV1Reason
)

// PauseNote says who pauses, when and why.
type PauseNote struct {
	At     time.Time
	Who    string // at most MaxPauseWho bytes
	Reason string // at most MaxPauseReason bytes
}

// Pause is a pause as read: of a kind, for the whole store (Kind set), or
// of a partition's queues (Kind 0), with who made it, when and why.
type Pause struct {
	Kind   Kind
	At     time.Time
	Who    string
	Reason string
	// Corrupt is the decoder's error when the row does not decode: it
	// holds all the same (a Scheduler takes it for a pause), and At, Who
	// and Reason are zero.
	Corrupt error

	// record is the row's value as read: a resume requires it unchanged.
	record store.Value
}

// Pauses are the pauses of the whole store as one read saw them.
type Pauses struct {
	// Kinds are the paused kinds, in ascending order.
	Kinds []Pause
	// Generation counts the resumes of kind pauses (see WakeState).
	Generation uint64

	// genValue is the generation row as read (nil: none).
	genValue store.Value
}

// Kind returns kind k's pause; ok is false when it is not paused.
func (ps Pauses) Kind(k Kind) (p Pause, ok bool) {
	for _, p := range ps.Kinds {
		if p.Kind == k {
			return p, true
		}
	}
	return Pause{}, false
}

// Ended reports whether a resume since the paused wake time w was written
// ended its generation: the partition is due at the Schedulers' next tick.
func (ps Pauses) Ended(w WakeState) bool {
	return w.Paused && w.Generation != ps.Generation%pausedGens
}

// ErrPaused: what a pause names is paused already. ErrNotPaused: what a
// resume names is not paused.
var (
	ErrPaused    = errors.New("timers: paused already")
	ErrNotPaused = errors.New("timers: not paused")
)

// Keys of the pause rows.
var (
	pauseGenerationKey = store.Key(gen.AppendPauseGenerationKey(nil))
	partitionPauseKey  = store.Key(gen.AppendPartitionPauseKey(nil))
)

// kindPauseKey is the key of kind k's pause.
func kindPauseKey(k Kind) store.Key { return gen.AppendKindPauseKey(nil, uint16(k)) }

// PartitionPauseKey returns the key of a partition's pause (a
// gen.PartitionPauseKey holding a gen.PauseV1). The key is shared: do not
// modify it.
func PartitionPauseKey() store.Key { return partitionPauseKey }

// decodePause decodes a pause row's value as read (a corrupt one is a
// pause all the same: see Pause.Corrupt).
func decodePause(k Kind, v store.Value) Pause {
	p := Pause{Kind: k, record: v}
	rec, err := gen.DecodePauseV1(v)
	if err != nil {
		p.Corrupt = fmt.Errorf("timers: pause of %s does not decode: %w", pauseName(k), err)
		return p
	}
	p.At, p.Who, p.Reason = store.DecodeTime(rec.AtMs), rec.Who, rec.Reason
	return p
}

func pauseName(k Kind) string {
	if k == 0 {
		return "a partition's queues"
	}
	return k.String()
}

// inMembers fails unless r reads MembersPartition, where kind pauses live.
func inMembers(r store.Reader, what string) error {
	got, err := r.Partition().AppendTuple(nil)
	want, _ := MembersPartition.AppendTuple(nil)
	if err != nil || !bytes.Equal(got, want) {
		return fmt.Errorf("timers: %s: kind pauses live in MembersPartition, not %s: %w", what, store.PartitionName(r.Partition()), store.ErrInvalid)
	}
	return nil
}

// Ranges of the rows a tick reads of MembersPartition: the memberships,
// the kind pauses and the generation, in one range read (tags 8 to 12;
// the dead letters' tags between never occur there).
var (
	membersStart, _ = gen.ClassRange(gen.TagSchedulerMemberKey)
	_, membersEnd   = gen.ClassRange(gen.TagPauseGenerationKey)
)

// ReadPauses reads the pauses of the whole store through r, a Reader of
// MembersPartition. It fails with an error wrapping store.ErrInvalid for
// a Reader of another partition, with store.ErrCorrupt when the
// generation row or a kind pause's key does not decode (a pause whose
// value does not decode is a pause: see Pause.Corrupt), and with the
// store's errors.
func ReadPauses(ctx context.Context, r store.Reader) (Pauses, error) {
	if err := inMembers(r, "read the pauses"); err != nil {
		return Pauses{}, err
	}
	start, _ := gen.ClassRange(gen.TagKindPauseKey)
	var ps Pauses
	var after store.Cursor
	for {
		page, err := r.Scan(ctx, start, membersEnd, after, 256)
		if err != nil {
			return Pauses{}, fmt.Errorf("timers: read the pauses: %w", err)
		}
		for _, kv := range page.Entries {
			if err := ps.add(kv); err != nil {
				return Pauses{}, err
			}
		}
		if page.Next == nil {
			return ps, nil
		}
		after = page.Next
	}
}

// add adds a row of MembersPartition, a kind pause or the generation, to
// ps, failing with store.ErrCorrupt when its key, or the generation's
// value, does not decode.
func (ps *Pauses) add(kv store.KeyValue) error {
	if bytes.Equal(kv.Key, pauseGenerationKey) {
		g, err := gen.DecodeU64Value(kv.Value)
		if err != nil {
			return fmt.Errorf("timers: the pause generation does not decode: %w", err)
		}
		ps.Generation, ps.genValue = g.Value, kv.Value
		return nil
	}
	k, err := gen.ParseKindPauseKey(kv.Key)
	if err != nil {
		return fmt.Errorf("timers: kind pause key %x: %w", []byte(kv.Key), err)
	}
	ps.Kinds = append(ps.Kinds, decodePause(Kind(k.Kind), kv.Value))
	return nil
}

// encodePause encodes n, failing with store.ErrInvalid for a time before
// the Unix epoch or texts over their bounds.
func encodePause(what string, n PauseNote) (store.Value, error) {
	at, err := store.EncodeTime(n.At)
	if err != nil {
		return nil, fmt.Errorf("timers: pause %s: %w", what, err)
	}
	v, err := gen.EncodePauseV1(gen.PauseV1{AtMs: at, Who: n.Who, Reason: n.Reason})
	if err != nil {
		return nil, fmt.Errorf("timers: pause %s: %v: %w", what, err, store.ErrInvalid)
	}
	return v, nil
}

// canPause fails with an error wrapping wire.ErrFormatTooOld (and so
// store.ErrInvalid) while r's store's format of the library's namespace is
// below gen.FormatPauseV1: a process of an older binary knows no pause and
// would fire what a pause holds, so a pause waits for the format's raise
// (package evolve), which every live process must know first.
func canPause(r store.Reader, what string) error {
	if f := store.FormatOf(r, gen.SchemaNamespace); f < gen.FormatPauseV1 {
		return fmt.Errorf("timers: pause %s: the store's format of %s is %d and pauses need %d, which every process must know before it is raised (evolve.Gate.Raise, mkitfdb formats raise): %w",
			what, gen.SchemaNamespace, f, gen.FormatPauseV1, wire.ErrFormatTooOld)
	}
	return nil
}

// PauseKind adds to b, a batch of MembersPartition (r reads it), what
// pauses kind k for the whole store, recorded with n, guarded on its not
// being paused: from each Scheduler's first tick that reads it, no timer
// of the kind fires, in any partition; each stays where it is (see the
// design note above) until ResumeKind. It adds nothing and fails with an
// error wrapping ErrPaused, returning the pause, when k is paused
// already; with wire.ErrFormatTooOld (a store.ErrInvalid) while the
// store's format of the library's namespace is below gen.FormatPauseV1;
// with store.ErrInvalid for kind 0, a Reader of another partition, or a
// note encodePause refuses (a time before the epoch,
// texts over MaxPauseWho or MaxPauseReason bytes); and with the store's
// errors.
func PauseKind(ctx context.Context, r store.Reader, b *store.Batch, k Kind, n PauseNote) (Pause, error) {
	if k == 0 {
		return Pause{}, fmt.Errorf("timers: pause kind 0: no kind: %w", store.ErrInvalid)
	}
	if err := inMembers(r, "pause "+k.String()); err != nil {
		return Pause{}, err
	}
	if err := canPause(r, k.String()); err != nil {
		return Pause{}, err
	}
	key := kindPauseKey(k)
	v, ok, err := r.Get(ctx, key)
	if err != nil {
		return Pause{}, fmt.Errorf("timers: read the pause of %v: %w", k, err)
	}
	if ok {
		return decodePause(k, v), fmt.Errorf("timers: pause %v: %w", k, ErrPaused)
	}
	rec, err := encodePause(k.String(), n)
	if err != nil {
		return Pause{}, err
	}
	b.Require(store.Absent(key)).Put(key, rec)
	return decodePause(k, rec), nil
}

// ResumeKind adds to b, a batch of MembersPartition (r reads it), what
// resumes kind k: its pause deleted, guarded on it as read, and the pause
// generation raised, guarded on it as read, so that at each Scheduler's
// next tick every partition a pause left timers in is due (see the design
// note above) and the kind's timers fire, each once. It returns the pause
// it ends. It adds nothing and fails with an error wrapping ErrNotPaused
// when k is not paused; with store.ErrInvalid for a Reader of another
// partition; with store.ErrCorrupt when the generation does not decode;
// and with the store's errors.
func ResumeKind(ctx context.Context, r store.Reader, b *store.Batch, k Kind) (Pause, error) {
	if err := inMembers(r, "resume "+k.String()); err != nil {
		return Pause{}, err
	}
	key := kindPauseKey(k)
	vs, err := r.GetMany(ctx, []store.Key{key, pauseGenerationKey})
	if err != nil {
		return Pause{}, fmt.Errorf("timers: read the pause of %v: %w", k, err)
	}
	if len(vs) != 2 {
		return Pause{}, fmt.Errorf("timers: read the pause of %v: %d values for 2 keys: %w", k, len(vs), store.ErrCorrupt)
	}
	if vs[0] == nil {
		return Pause{}, fmt.Errorf("timers: resume %v: %w", k, ErrNotPaused)
	}
	var g uint64
	if vs[1] != nil {
		u, err := gen.DecodeU64Value(vs[1])
		if err != nil {
			return Pause{}, fmt.Errorf("timers: the pause generation does not decode: %w", err)
		}
		g = u.Value
	}
	next, _ := gen.EncodeU64Value(gen.U64Value{Value: g + 1})
	b.Require(store.Equals(key, vs[0]), store.Guard(pauseGenerationKey, vs[1])).Delete(key).Put(pauseGenerationKey, next)
	return decodePause(k, vs[0]), nil
}

// ReadPartitionPause reads the pause of r's partition's queues; ok is
// false when they are not paused. It fails with the store's errors (a
// pause that does not decode is a pause: see Pause.Corrupt).
func ReadPartitionPause(ctx context.Context, r store.Reader) (p Pause, ok bool, err error) {
	v, ok, err := r.Get(ctx, partitionPauseKey)
	if err != nil || !ok {
		return Pause{}, false, wrapRead(err, "the pause of "+store.PartitionName(r.Partition()))
	}
	return decodePause(0, v), true, nil
}

// wrapRead names what a failed read was reading (nil stays nil).
func wrapRead(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("timers: read %s: %w", what, err)
}

// PausePartition adds to b what pauses the queues of r's partition,
// recorded with n, guarded on their not being paused: from each claim that
// reads it, no Scheduler fires the partition's timers of the library's
// kinds (its relay and outcome delivery, see Kind.Queue), which stay where
// they are until ResumePartition; its other timers fire as before (pause
// their kind for the whole store with PauseKind). It adds nothing and
// fails with an error wrapping ErrPaused, returning the pause, when they
// are paused already; with wire.ErrFormatTooOld (a store.ErrInvalid)
// while the store's format of the library's namespace is below
// gen.FormatPauseV1; with store.ErrInvalid for a note encodePause
// refuses; and with the store's errors.
func PausePartition(ctx context.Context, r store.Reader, b *store.Batch, n PauseNote) (Pause, error) {
	if err := canPause(r, "the queues of "+store.PartitionName(r.Partition())); err != nil {
		return Pause{}, err
	}
	p, ok, err := ReadPartitionPause(ctx, r)
	switch {
	case err != nil:
		return Pause{}, err
	case ok:
		return p, fmt.Errorf("timers: pause the queues of %s: %w", store.PartitionName(r.Partition()), ErrPaused)
	}
	rec, err := encodePause("the queues of "+store.PartitionName(r.Partition()), n)
	if err != nil {
		return Pause{}, err
	}
	b.Require(store.Absent(partitionPauseKey)).Put(partitionPauseKey, rec)
	return decodePause(0, rec), nil
}

// ResumePartition adds to b what resumes the queues of r's partition: its
// pause deleted, guarded on it as read, and the partition's wake time
// lowered to at, or to its earliest timer's due time when that is earlier
// (a paused timer is due already), so that a Scheduler claims it then and
// fires its queue timers, each once. It returns the pause it ends. It
// adds nothing and fails with an error wrapping ErrNotPaused when they are
// not paused; with store.ErrInvalid for an at before the Unix epoch's
// first millisecond; and with the store's errors.
func ResumePartition(ctx context.Context, r store.Reader, b *store.Batch, at time.Time) (Pause, error) {
	atMs, err := store.EncodeTime(at)
	if err != nil || atMs == 0 {
		return Pause{}, fmt.Errorf("timers: resume the queues of %s at %v: %w", store.PartitionName(r.Partition()), at, store.ErrInvalid)
	}
	p, ok, err := ReadPartitionPause(ctx, r)
	switch {
	case err != nil:
		return Pause{}, err
	case !ok:
		return Pause{}, fmt.Errorf("timers: resume the queues of %s: %w", store.PartitionName(r.Partition()), ErrNotPaused)
	}
	first, err := r.Scan(ctx, timerRowStart, timerRowEnd, nil, 1)
	if err != nil {
		return Pause{}, wrapRead(err, "the timers of "+store.PartitionName(r.Partition()))
	}
	if len(first.Entries) > 0 {
		if tk, err := gen.ParseTimerKey(first.Entries[0].Key); err == nil {
			atMs = min(atMs, max(tk.DueAtMs, 1))
		}
	}
	b.Require(store.Equals(partitionPauseKey, p.record)).Delete(partitionPauseKey).WakeAt(wakeTime(atMs))
	return p, nil
}

// WakeState is what a partition's wake time says (see DescribeWake).
type WakeState struct {
	// At is when the due index wakes the partition (the zero Time: never,
	// or parked): its wake time, or, when Paused, the due time of its
	// earliest timer the pause left out.
	At time.Time
	// Parked says a Scheduler's claim parked the wake time (see
	// ParkedWake).
	Parked bool
	// Paused says a Scheduler left due timers of paused kinds, or of the
	// partition's paused queues, where they are, under pause generation
	// Generation (a slot: the generation modulo the slots' count):
	// the partition is due again at At, or at the Schedulers' next tick
	// once a resume ended that generation (Pauses.Ended).
	Paused     bool
	Generation uint64
}

// DescribeWake says what the wake time at (ok false: none), as
// store.DueIndex's NextWake or ScanDue returns it, means.
func DescribeWake(at time.Time, ok bool) WakeState {
	if !ok {
		return WakeState{}
	}
	ms, _ := store.EncodeTime(at)
	if ms == parkedMs {
		return WakeState{Parked: true}
	}
	slot, off, paused := splitPausedWake(ms)
	if !paused {
		return WakeState{At: store.DecodeTime(ms)}
	}
	w := WakeState{Paused: true, Generation: slot}
	if off != pausedNone {
		w.At = store.DecodeTime(off)
	}
	return w
}

// PausedWake is the wake time a Scheduler's release writes for a
// partition in which it left due timers for a pause, under pause
// generation generation (Pauses.Generation), whose earliest timer the
// pause left out is due at next (the zero Time: none): the inverse of
// DescribeWake, for tests and tools that check what a release wrote.
func PausedWake(generation uint64, next time.Time) time.Time {
	ms, _ := store.EncodeTime(next) // 0 before the epoch: none
	return store.DecodeTime(pausedWakeMs(generation, ms))
}

// Record returns the pause row's value as read (a view hashes it for the
// rev a resume's guard pins). It is shared: do not modify it.
func (p Pause) Record() store.Value { return p.record }

// PausedWakeRange is the range of the paused wake times a Scheduler's
// release writes (see PausedWake): a ScanDue from From to Until lists the
// partitions a Scheduler left timers in for a pause. Every paused wake
// time is later than every wake time a timer sets and earlier than
// ParkedWake.
func PausedWakeRange() (from, until time.Time) {
	return store.DecodeTime(pausedBaseMs), store.DecodeTime(pausedEndMs - 1)
}
