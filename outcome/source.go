package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: a source is the service's, the rows are the library's.
//
// A source knows one record class of the service's own schema: where a
// record is (its key), when it is terminal, and what its outcome says.
// The library knows none of it: Append writes the library's pending row
// (gen.OutcomePendingKey, valued gen.OutcomePendingV1: the source's name
// and the record's key) beside the record, in the partition the record
// lives in, and a fire reads the record at that key and asks the named
// source for its Envelope. So a partition holds its own schema's records
// plus the library's runtime rows, never another schema's records, and
// one backlog and one timer serve every source of the partition.

// AckAction says what an acknowledgment does to the source's record.
type AckAction uint8

// The actions of SourceConfig.OnAck.
const (
	// KeepRecord keeps the record once its outcome is acknowledged: only
	// the pending row goes. The record stays terminal, and so can never be
	// appended again (Append refuses a terminal prior).
	KeepRecord AckAction = iota + 1
	// DeleteRecord deletes the record in the acknowledging batch, guarded
	// by the value that was delivered.
	DeleteRecord
)

// Event is what a source says of a terminal record, besides its id: the
// type, timestamp and payload of the Envelope that carries it.
type Event struct {
	// Type names the kind of event ("order.shipped"): 1 to
	// MaxEnvelopeTypeBytes bytes of visible ASCII.
	Type string
	// Time is when the outcome happened, kept to the millisecond. Zero
	// means when it was queued: the time the outbox.Builder that appended
	// it was given (which pending rows queued before sources existed do
	// not record: theirs must come from the record).
	Time time.Time
	// Data is the payload: a value encoding/json encodes as a JSON object;
	// a json.RawMessage holding one, taken as it is once checked; or a
	// JSONAppender, which encodes itself.
	Data any
}

// JSONAppender is a payload that encodes itself, without reflection:
// AppendJSON appends its JSON form, one JSON object, to dst. A Delivery
// trusts it as it trusts encoding/json's output, checking its first byte
// only, so an appender must produce valid JSON (test it against
// encoding/json), and fail rather than append anything else.
type JSONAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// MaxSourceNameBytes bounds a source's name.
const MaxSourceNameBytes = gen.MaxOutcomeSourceBytes

// SourceConfig declares an outcome source of the records of one class of
// the service's schema, whose keys are K and whose records are R: the
// generated codec functions and the service's rules. Every field is
// required but Synthetic and LegacyKey. The functions must be pure (the
// same result for the same arguments, at every fire and on every
// machine) and safe for concurrent use.
type SourceConfig[K Key, R any] struct {
	// Name names the source in the pending rows it writes, so it must
	// never change while rows are pending: 1 to MaxSourceNameBytes bytes of
	// a-z, 0-9, '.', '_' and '-', starting with a letter ("orders.shipped").
	Name string
	// Namespace is the namespace of the record's schema (its generated
	// package's SchemaNamespace): Append encodes the terminal record at
	// the store's format of it (outbox.Builder.Format).
	Namespace string
	// ParseKey parses the record's key: the schema's generated
	// Parse<Key> (ordersgen.ParseOrderKey).
	ParseKey func(b []byte) (K, error)
	// Decode and Encode are the record's generated codec. Decode reads
	// every version the key class holds: a value family's Decode
	// (ordersgen.NewOrderKeyValues(v).Decode), so that a record of a
	// newer version fails with store.ErrNewerVersion and a fire keeps its
	// pending row for a binary that reads it, counted apart from corrupt
	// ones; or a record's own decoder (ordersgen.DecodeOrderV1). Encode
	// writes the newest version the store's format allows: the family's
	// Encode(v, format), or a record's own encoder through [OneVersion]
	// (OneVersion(ordersgen.EncodeOrderV1)).
	Decode func(b []byte) (R, error)
	Encode func(r R, format uint32) ([]byte, error)
	// Terminal reports whether r is terminal: Append refuses a terminal
	// value that is not, and a prior value that is; a fire keeps, and
	// logs, a pending row whose record is not.
	Terminal func(r R) bool
	// ID returns the outcome's id, which receivers deduplicate by
	// (Envelope.ID): 1 to MaxEnvelopeIDBytes bytes of visible ASCII,
	// unique among the outcomes the sink receives from every source.
	ID func(k K, r R) string
	// Event returns the rest of the outcome's envelope. An error keeps the
	// row queued, logged, for a repair.
	Event func(k K, r R) (Event, error)
	// Synthetic, when set, reports whether an outcome is synthetic: it is
	// acknowledged without a sink call (counted in
	// telemetry.MetricSyntheticOutcomesAcked).
	Synthetic func(k K, r R) bool
	// OnAck says what the acknowledgment does to the record: KeepRecord
	// or DeleteRecord.
	OnAck AckAction
	// LegacyKey, when set, resolves pending rows written before pending
	// rows named their source (their value is empty), whose id names the
	// record: it returns the record's key for such an id. At most one
	// source of a Delivery sets it; without one, such rows are kept and
	// logged.
	LegacyKey func(id string) (K, error)
}

// Key is a generated key class: its AppendKey appends its encoding.
type Key interface {
	AppendKey(dst []byte) ([]byte, error)
}

// Source is an outcome source, built by NewSource, to register in
// DeliveryConfig.Sources.
type Source interface {
	// Name returns the name the source's pending rows carry.
	Name() string
	core() *sourceCore
}

// sourceCore is what a Delivery uses of a source: its name, what an
// acknowledgment does, and its schema's rules behind functions of bytes.
type sourceCore struct {
	name gen.OutcomeSource
	keep bool
	// resolve returns the envelope of the record at key holding value,
	// queued at queued (zero: unknown), and whether it is synthetic.
	resolve func(key store.Key, value store.Value, queued time.Time) (Envelope, bool, error)
	// legacyKey returns the record key a legacy pending row's id names
	// (nil: the source resolves none).
	legacyKey func(id string) (store.Key, error)
}

// TypedSource is the source of one record class (see SourceConfig). It is
// immutable and safe for concurrent use.
type TypedSource[K Key, R any] struct {
	c  SourceConfig[K, R]
	sc *sourceCore
}

// NewSource builds a source. It fails with an error wrapping
// store.ErrInvalid for a name that breaks SourceConfig.Name's rule, a
// missing function, or an OnAck that is neither KeepRecord nor
// DeleteRecord.
func NewSource[K Key, R any](c SourceConfig[K, R]) (*TypedSource[K, R], error) {
	if err := checkSourceName(c.Name); err != nil {
		return nil, err
	}
	switch {
	case c.Namespace == "" || c.ParseKey == nil || c.Decode == nil || c.Encode == nil || c.Terminal == nil || c.ID == nil || c.Event == nil:
		return nil, fmt.Errorf("outcome: source %q: Namespace, ParseKey, Decode, Encode, Terminal, ID and Event are required: %w", c.Name, store.ErrInvalid)
	case c.OnAck != KeepRecord && c.OnAck != DeleteRecord:
		return nil, fmt.Errorf("outcome: source %q: OnAck %d: want KeepRecord or DeleteRecord: %w", c.Name, c.OnAck, store.ErrInvalid)
	}
	s := &TypedSource[K, R]{c: c}
	s.sc = &sourceCore{name: gen.MustOutcomeSource(c.Name), keep: c.OnAck == KeepRecord, resolve: s.resolve}
	if c.LegacyKey != nil {
		s.sc.legacyKey = s.legacyKey
	}
	return s, nil
}

// OneVersion adapts the encoder of a record that has one version (a
// generated Encode<Record>) to SourceConfig.Encode: it encodes at every
// store format alike.
func OneVersion[R any](encode func(r R) ([]byte, error)) func(r R, format uint32) ([]byte, error) {
	return func(r R, _ uint32) ([]byte, error) { return encode(r) }
}

// checkSourceName checks SourceConfig.Name's rule.
func checkSourceName(name string) error {
	ok := len(name) > 0 && len(name) <= MaxSourceNameBytes && name[0] >= 'a' && name[0] <= 'z'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("outcome: source name %q: want 1 to %d bytes of a-z, 0-9, '.', '_' and '-', starting with a letter: %w",
			name, MaxSourceNameBytes, store.ErrInvalid)
	}
	return nil
}

// Name returns the source's name.
func (s *TypedSource[K, R]) Name() string { return s.c.Name }

func (s *TypedSource[K, R]) core() *sourceCore {
	if s == nil {
		return nil
	}
	return s.sc
}

// Append appends to b the terminal outcome of the record at key: the
// record, which must still hold prior (a value of the record class that
// is not terminal), becomes terminal, and is indexed as pending delivery
// by this source at a new sequence, which it returns
// (outbox.Builder.Outcome, which keeps the trace context of ctx's span
// with the row, so that the outcome's delivery continues the writer's
// trace). It fails with store.ErrInvalid, appending
// nothing, for a key that does not encode, a prior value that does not
// decode or is terminal, a terminal value that is not terminal or does
// not encode, an id that breaks SourceConfig.ID's rule, and for every
// failure of Builder.Outcome.
func (s *TypedSource[K, R]) Append(ctx context.Context, b *outbox.Builder, key K, prior store.Value, terminal R) (seq uint64, err error) {
	k, err := key.AppendKey(nil)
	if err != nil {
		return 0, fmt.Errorf("outcome: source %s: key: %w", s.c.Name, errInvalid(err))
	}
	if prior == nil {
		return 0, fmt.Errorf("outcome: source %s: no prior value: the record must exist: %w", s.c.Name, store.ErrInvalid)
	}
	if p, err := s.c.Decode(prior); err != nil {
		return 0, fmt.Errorf("outcome: source %s: prior value does not decode (%v): %w", s.c.Name, err, store.ErrInvalid)
	} else if s.c.Terminal(p) {
		return 0, fmt.Errorf("outcome: source %s: prior value is already terminal: %w", s.c.Name, store.ErrInvalid)
	}
	if !s.c.Terminal(terminal) {
		return 0, fmt.Errorf("outcome: source %s: terminal value %T: %w", s.c.Name, terminal, ErrNotTerminal)
	}
	value, err := s.c.Encode(terminal, b.Format(s.c.Namespace))
	if err != nil {
		return 0, fmt.Errorf("outcome: source %s: terminal value: %w", s.c.Name, errInvalid(err))
	}
	id, err := s.id(key, terminal)
	if err != nil {
		return 0, err
	}
	return b.Outcome(ctx, outbox.Outcome{ID: id, Source: s.sc.name, Key: k, Prior: prior, Terminal: value})
}

// id returns the outcome id of record r at key k, checked.
func (s *TypedSource[K, R]) id(k K, r R) (gen.OutcomeID, error) {
	id := s.c.ID(k, r)
	if !visibleASCII(id, MaxEnvelopeIDBytes) {
		return gen.OutcomeID{}, fmt.Errorf("outcome: source %s: id %q: want 1 to %d bytes of visible ASCII: %w", s.c.Name, id, MaxEnvelopeIDBytes, store.ErrInvalid)
	}
	return gen.MustOutcomeID(id), nil // visible ASCII within the bound is an OutcomeID
}

// resolve returns the envelope of the record at key holding value,
// queued at queued (zero: unknown), and whether it is synthetic. It fails for a key or value of another class,
// a record that is not terminal, an id or event that breaks the
// envelope's rules.
func (s *TypedSource[K, R]) resolve(key store.Key, value store.Value, queued time.Time) (Envelope, bool, error) {
	k, err := s.c.ParseKey(key)
	if err != nil {
		return Envelope{}, false, fmt.Errorf("%w: record key: %w", errUndecodable, err)
	}
	r, err := s.c.Decode(value)
	if err != nil {
		return Envelope{}, false, fmt.Errorf("%w: record: %w", errUndecodable, err)
	}
	if !s.c.Terminal(r) {
		return Envelope{}, false, ErrNotTerminal
	}
	id, err := s.id(k, r)
	if err != nil {
		return Envelope{}, false, err
	}
	ev, err := s.c.Event(k, r)
	if err != nil {
		return Envelope{}, false, fmt.Errorf("event: %w", err)
	}
	// Data encoded here, by encoding/json or the payload's own appender,
	// is valid JSON by construction: only its first byte is checked. A
	// json.RawMessage is checked whole.
	var data []byte
	trusted := true
	switch d := ev.Data.(type) {
	case json.RawMessage:
		data, trusted = d, false
	case JSONAppender:
		if data, err = d.AppendJSON(nil); err != nil {
			return Envelope{}, false, fmt.Errorf("event data: %w", errInvalid(err))
		}
	default:
		if data, err = json.Marshal(d); err != nil {
			return Envelope{}, false, fmt.Errorf("event data: %v: %w", err, store.ErrInvalid)
		}
	}
	if ev.Time.IsZero() {
		ev.Time = queued
	}
	e := Envelope{ID: id.String(), Type: ev.Type, Timestamp: ev.Time, Data: data}
	if trusted {
		if err := e.checkFields(); err != nil {
			return Envelope{}, false, err
		}
		if len(data) == 0 || data[0] != '{' {
			return Envelope{}, false, fmt.Errorf("outcome: envelope %q: data is not a JSON object: %w", e.ID, store.ErrInvalid)
		}
	} else if err := e.check(); err != nil {
		return Envelope{}, false, err
	}
	synthetic := s.c.Synthetic != nil && s.c.Synthetic(k, r)
	return e, synthetic, nil
}

// errUndecodable marks a record (or its key) that its source's codec
// rejects.
var errUndecodable = errors.New("the record does not decode")

// legacyKey returns the record key a legacy pending row's id names.
func (s *TypedSource[K, R]) legacyKey(id string) (store.Key, error) {
	k, err := s.c.LegacyKey(id)
	if err != nil {
		return nil, err
	}
	return k.AppendKey(nil)
}
