package store

import (
	"bytes"
	"fmt"
	"time"
)

// PreconditionOp says what a Precondition requires of its key.
type PreconditionOp uint8

const (
	// MustEqual requires the key to hold exactly Value.
	MustEqual PreconditionOp = iota + 1
	// MustBeAbsent requires the key to be absent.
	MustBeAbsent
)

// Precondition is one guard of a Batch, checked against the snapshot the
// batch's writes commit on: a row's value (MustEqual, MustBeAbsent), or
// the partition's wake time in the due index (MustWakeAt, see WakeIs).
type Precondition struct {
	Op    PreconditionOp
	Key   Key       // for MustEqual and MustBeAbsent
	Value Value     // for MustEqual only
	Wake  time.Time // for MustWakeAt only (zero: none)
}

// Equals requires key to hold exactly value (an empty value is a value).
func Equals(key Key, value Value) Precondition {
	if value == nil {
		value = Value{}
	}
	return Precondition{Op: MustEqual, Key: key, Value: value}
}

// Absent requires key to be absent.
func Absent(key Key) Precondition { return Precondition{Op: MustBeAbsent, Key: key} }

// Guard requires key to hold observed, or to be absent when observed is
// nil: the precondition that a read-modify-write of one row needs.
func Guard(key Key, observed Value) Precondition {
	if observed == nil {
		return Absent(key)
	}
	return Equals(key, observed)
}

// Holds reports whether a row precondition (MustEqual, MustBeAbsent)
// holds for the row's current state (value nil when absent). It is false
// for a MustWakeAt precondition, which a store evaluates against the wake
// time.
func (c Precondition) Holds(current Value) bool {
	switch c.Op {
	case MustEqual:
		return current != nil && bytes.Equal(current, c.Value)
	case MustBeAbsent:
		return current == nil
	}
	return false
}

// String describes the precondition without its value.
func (c Precondition) String() string {
	switch c.Op {
	case MustEqual:
		return fmt.Sprintf("equals(%x, %d bytes)", []byte(c.Key), len(c.Value))
	case MustBeAbsent:
		return fmt.Sprintf("absent(%x)", []byte(c.Key))
	case MustWakeAt:
		return fmt.Sprintf("wake(%d)", encodeTime(c.Wake))
	}
	return fmt.Sprintf("precondition(op %d)", c.Op)
}

// WriteOp says what a Write does.
type WriteOp uint8

const (
	// OpPut sets Key to Value.
	OpPut WriteOp = iota + 1
	// OpDelete removes Key (absent keys are fine).
	OpDelete
)

// Write is one write of a Batch.
type Write struct {
	Op    WriteOp
	Key   Key
	Value Value // for OpPut only
}

// Put sets key to value.
func Put(key Key, value Value) Write {
	if value == nil {
		value = Value{}
	}
	return Write{Op: OpPut, Key: key, Value: value}
}

// Delete removes key.
func Delete(key Key) Write { return Write{Op: OpDelete, Key: key} }

// Batch is a guarded batch: preconditions, then writes applied in order
// (the last write to a key wins), atomically, inside one partition.
//
// The builder methods append and return the batch so calls chain:
//
//	b := store.NewBatch().Require(store.Absent(k)).Put(k, v)
//
// A Batch is not safe for concurrent mutation. Apply does not retain or
// modify it.
type Batch struct {
	Preconditions []Precondition
	Writes        []Write
	// Deadline, when non-zero, is the latest store-clock time at which the
	// batch may commit; past it Apply reports DeadlinePassed and writes
	// nothing.
	Deadline time.Time
	// Wakeup, when set, changes the partition's wake time in the store's
	// due index in the same transaction (see DueIndex). Stores without a
	// due index reject batches that carry one, or a WakeIs precondition,
	// with ErrInvalid.
	Wakeup *Wakeup
}

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{} }

// Require appends preconditions.
func (b *Batch) Require(cs ...Precondition) *Batch {
	b.Preconditions = append(b.Preconditions, cs...)
	return b
}

// Put appends a put of key to value.
func (b *Batch) Put(key Key, value Value) *Batch {
	b.Writes = append(b.Writes, Put(key, value))
	return b
}

// Delete appends a delete of key.
func (b *Batch) Delete(key Key) *Batch {
	b.Writes = append(b.Writes, Delete(key))
	return b
}

// Add appends writes.
func (b *Batch) Add(ws ...Write) *Batch {
	b.Writes = append(b.Writes, ws...)
	return b
}

// WithDeadline sets the batch's deadline.
func (b *Batch) WithDeadline(t time.Time) *Batch {
	b.Deadline = t
	return b
}

// Merge appends other's preconditions and writes to b, keeping the
// earlier of the two deadlines.
func (b *Batch) Merge(other *Batch) *Batch {
	if other == nil {
		return b
	}
	b.Preconditions = append(b.Preconditions, other.Preconditions...)
	b.Writes = append(b.Writes, other.Writes...)
	if !other.Deadline.IsZero() && (b.Deadline.IsZero() || other.Deadline.Before(b.Deadline)) {
		b.Deadline = other.Deadline
	}
	if w := other.Wakeup; w != nil {
		if w.Exact {
			b.Wakeup = w
		} else {
			b.WakeAt(w.At)
		}
	}
	return b
}

// Clone returns a copy whose slices can be appended to without touching b.
// Keys and values are shared.
func (b *Batch) Clone() *Batch {
	return &Batch{
		Preconditions: append([]Precondition(nil), b.Preconditions...),
		Writes:        append([]Write(nil), b.Writes...),
		Deadline:      b.Deadline,
		Wakeup:        b.Wakeup,
	}
}

// Ops counts the operations the batch spends against
// Capabilities.MaxBatchOps: every precondition and every write.
func (b *Batch) Ops() int { return len(b.Preconditions) + len(b.Writes) }

// Bytes counts the key and value bytes the batch spends against
// Capabilities.MaxBatchBytes.
func (b *Batch) Bytes() int {
	n := 0
	for _, c := range b.Preconditions {
		n += len(c.Key) + len(c.Value)
	}
	for _, w := range b.Writes {
		n += len(w.Key) + len(w.Value)
	}
	return n
}

// Validate checks the batch against caps without I/O. It fails with an
// error wrapping ErrInvalid when the batch is empty, holds an empty key or
// an unknown op, or exceeds any limit: more than MaxBatchOps minus
// ReservedBatchOps operations, a key over MaxKeyBytes, a value over
// MaxValueBytes, more than MaxBatchBytes in all. Each limit is inclusive.
func (b *Batch) Validate(caps Capabilities) error {
	if b == nil || b.Ops() == 0 && b.Wakeup == nil {
		return fmt.Errorf("%w: empty batch", ErrInvalid)
	}
	if err := b.Wakeup.validate(); err != nil {
		return err
	}
	if ops, limit := b.Ops(), caps.MaxBatchOps-caps.ReservedBatchOps; ops > limit {
		return fmt.Errorf("%w: batch has %d operations, limit %d (%d reserved)", ErrInvalid, ops, limit, caps.ReservedBatchOps)
	}
	for i, c := range b.Preconditions {
		switch c.Op {
		case MustEqual, MustBeAbsent:
		case MustWakeAt:
			if c.Key != nil || c.Value != nil {
				return fmt.Errorf("%w: precondition %d on the wake time has a key or value", ErrInvalid, i)
			}
			if _, err := EncodeTime(c.Wake); err != nil {
				return fmt.Errorf("precondition %d on the wake time: %w", i, err)
			}
			continue
		default:
			return fmt.Errorf("%w: precondition %d has unknown op %d", ErrInvalid, i, c.Op)
		}
		if err := caps.checkRow("precondition", i, c.Key, c.Value); err != nil {
			return err
		}
	}
	for i, w := range b.Writes {
		if w.Op != OpPut && w.Op != OpDelete {
			return fmt.Errorf("%w: write %d has unknown op %d", ErrInvalid, i, w.Op)
		}
		if err := caps.checkRow("write", i, w.Key, w.Value); err != nil {
			return err
		}
	}
	if n := b.Bytes(); n > caps.MaxBatchBytes {
		return fmt.Errorf("%w: batch has %d bytes, limit %d", ErrInvalid, n, caps.MaxBatchBytes)
	}
	return nil
}

// Outcome is the result of a guarded batch that the store evaluated.
type Outcome uint8

const (
	// Committed: every write landed.
	Committed Outcome = iota + 1
	// PreconditionFailed: a precondition did not hold; nothing was written.
	PreconditionFailed
	// DeadlinePassed: the store's clock was past the batch's deadline;
	// nothing was written.
	DeadlinePassed
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case PreconditionFailed:
		return "precondition failed"
	case DeadlinePassed:
		return "deadline passed"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// BatchOutcome is what Apply reports for a batch it evaluated.
type BatchOutcome struct {
	Outcome Outcome
	// Failed is the first precondition that did not hold, and FailedIndex
	// its index in Batch.Preconditions (PreconditionFailed only).
	Failed      Precondition
	FailedIndex int
	// Now is the store clock's reading that passed the deadline
	// (DeadlinePassed only).
	Now time.Time
}

// Committed reports whether the batch committed.
func (o BatchOutcome) Committed() bool { return o.Outcome == Committed }

func (o BatchOutcome) String() string {
	switch o.Outcome {
	case PreconditionFailed:
		return fmt.Sprintf("precondition %d failed: %v", o.FailedIndex, o.Failed)
	case DeadlinePassed:
		return fmt.Sprintf("deadline passed at %v", o.Now)
	}
	return o.Outcome.String()
}
