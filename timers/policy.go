package timers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"
	"github.com/zeebo/blake3"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// RetryPolicy says when a kind's failing timer fires again and when it
// becomes a dead letter. A failure is a handler error or panic, an
// outcome the store rejects, or a Retry outcome, recorded with the error
// the handler gave (a store that fails while the run records it fails the
// run instead: see RunDue); after its n-th failure
// since it last succeeded a timer waits
//
//	min(InitialInterval * BackoffFactor^(n-1), MaxInterval)
//
// less a jitter of up to Jitter of that interval, derived with BLAKE3 from
// the timer's identity (partition, kind, reference) and n, so that timers
// failing together spread out and one timer's intervals are reproducible.
// A Retry outcome with After set waits that long instead. The failure
// that reaches MaxAttempts fires (counting the first fire) makes the timer
// a dead letter (see DeadLetter), as does an error wrapped by Permanent.
//
// The fields are taken as they are: start from DefaultRetryPolicy. The
// zero RetryPolicy stands for the default (see KindConfig.Retry).
type RetryPolicy struct {
	// InitialInterval is the wait after the first failure, at least a
	// millisecond.
	InitialInterval time.Duration
	// BackoffFactor multiplies the wait at each further failure; at least 1.
	BackoffFactor float64
	// MaxInterval caps the wait; at least InitialInterval.
	MaxInterval time.Duration
	// MaxAttempts is how many fires a timer gets before it becomes a dead
	// letter, the first one included; 0 is no limit.
	MaxAttempts int
	// Jitter is the largest fraction of a wait taken off it, in [0, 1].
	Jitter float64
}

// DefaultRetryPolicy is the retry policy of a service's kind registered
// without one (KindConfig.Retry): a second, doubling to at most an hour, 10% jitter,
// 25 attempts (about 19 hours from the first fire to the dead letter).
// The library's own kinds (KindRelay, KindOutcomeDelivery) retry for ever,
// RetryBackoff apart: their timers stand for a partition's queue, never
// for one job.
var DefaultRetryPolicy = RetryPolicy{
	InitialInterval: time.Second,
	BackoffFactor:   2,
	MaxInterval:     time.Hour,
	MaxAttempts:     25,
	Jitter:          0.1,
}

// libraryRetryPolicy is the retry policy of the library's own kinds.
var libraryRetryPolicy = RetryPolicy{
	InitialInterval: RetryBackoff,
	BackoffFactor:   1,
	MaxInterval:     RetryBackoff,
}

// validate fails with an error wrapping store.ErrInvalid naming the first
// field out of its range.
func (p RetryPolicy) validate() error {
	switch {
	case p.InitialInterval < time.Millisecond:
		return fmt.Errorf("timers: KindConfig.Retry: InitialInterval %v is under a millisecond: %w", p.InitialInterval, store.ErrInvalid)
	case !(p.BackoffFactor >= 1) || math.IsInf(p.BackoffFactor, 0):
		return fmt.Errorf("timers: KindConfig.Retry: BackoffFactor %v is not a finite number of at least 1: %w", p.BackoffFactor, store.ErrInvalid)
	case p.MaxInterval < p.InitialInterval:
		return fmt.Errorf("timers: KindConfig.Retry: MaxInterval %v is under InitialInterval %v: %w", p.MaxInterval, p.InitialInterval, store.ErrInvalid)
	case p.MaxAttempts < 0:
		return fmt.Errorf("timers: KindConfig.Retry: MaxAttempts %d is negative (0 is no limit): %w", p.MaxAttempts, store.ErrInvalid)
	case !(p.Jitter >= 0 && p.Jitter <= 1):
		return fmt.Errorf("timers: KindConfig.Retry: Jitter %v is not in [0, 1]: %w", p.Jitter, store.ErrInvalid)
	}
	return nil
}

// Delay is the wait after the attempt-th failure (1 for the first) of
// timer (kind, reference) of partition p. It is a pure function of its
// arguments. A partition whose identity does not encode gets no jitter.
func (p RetryPolicy) Delay(attempt int, part store.Partition, kind Kind, reference string) time.Duration {
	var id []byte
	if part != nil {
		id, _ = part.AppendTuple(nil)
	}
	return p.delay(attempt, id, kind, reference)
}

func (p RetryPolicy) delay(attempt int, id []byte, kind Kind, reference string) time.Duration {
	attempt = max(attempt, 1)
	d := float64(p.InitialInterval) * math.Pow(p.BackoffFactor, float64(attempt-1))
	wait := p.MaxInterval
	if d < float64(p.MaxInterval) {
		wait = time.Duration(d)
	}
	if p.Jitter > 0 {
		h := blake3.New()
		_, _ = h.Write(id)
		var buf [2 + 8 + 8]byte
		binary.BigEndian.PutUint16(buf[:2], uint16(kind))
		binary.BigEndian.PutUint64(buf[2:10], uint64(len(reference)))
		binary.BigEndian.PutUint64(buf[10:], uint64(attempt))
		_, _ = h.Write(buf[:10])
		_, _ = h.Write([]byte(reference))
		_, _ = h.Write(buf[10:])
		var sum [8]byte
		_, _ = h.Digest().Read(sum[:])
		u := float64(binary.BigEndian.Uint64(sum[:])>>11) / (1 << 53) // [0, 1)
		wait -= time.Duration(float64(wait) * p.Jitter * u)
	}
	return max(wait, time.Millisecond)
}

// permanent marks an error its handler says retrying cannot cure.
type permanent struct{ err error }

func (e *permanent) Error() string { return e.err.Error() }
func (e *permanent) Unwrap() error { return e.err }
func (e *permanent) Is(target error) bool {
	return target == ErrPermanent
}

// ErrPermanent matches (errors.Is) every error wrapped by Permanent.
var ErrPermanent = errors.New("timers: permanent failure")

// Permanent wraps err so that a handler returning it (or an error
// wrapping it) makes its timer a dead letter at once, whatever attempts
// its retry policy has left. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err: err}
}

// Period is the schedule of a periodic kind (see KindConfig.Period): Next returns
// the first scheduled time strictly after t.
type Period interface {
	Next(t time.Time) time.Time
}

// every is a Period of a fixed interval.
type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// Every returns the period of a kind that fires every d (at least a
// millisecond), counted from its timer's scheduled times: the first one
// is the due time the timer was scheduled at, and each next one is d
// after the one before, however late a fire ran.
func Every(d time.Duration) Period { return every(d) }

// cronPeriod is a Period on a cron schedule, read in UTC.
type cronPeriod struct{ s cron.Schedule }

func (c cronPeriod) Next(t time.Time) time.Time { return c.s.Next(t.UTC()) }

// Cron returns the period of a kind that fires on the cron schedule spec,
// in UTC: five fields (minute, hour, day of month, month, day of week) or
// a descriptor (@hourly, @daily, @weekly, @monthly, @yearly, @every 90m).
// It fails with an error wrapping store.ErrInvalid for a spec that does
// not parse.
func Cron(spec string) (Period, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("timers: cron schedule %q: %v: %w", spec, err, store.ErrInvalid)
	}
	return cronPeriod{s: s}, nil
}

// nextPeriod is the scheduled time of the period after the one scheduled
// at periodMs, fired at nowMs: the first scheduled time after nowMs, so
// that a fire late by several periods stands for all of them (the missed
// periods fire once, see KindConfig.Period). It is after periodMs in any case,
// and math.MaxUint64 when the period has no time after it.
func nextPeriod(p Period, periodMs, nowMs uint64) uint64 {
	if e, ok := p.(every); ok {
		d := uint64(time.Duration(e) / time.Millisecond)
		d = max(d, 1)
		if nowMs < periodMs {
			return addMs(periodMs, d)
		}
		k := (nowMs-periodMs)/d + 1
		if k > (math.MaxUint64-periodMs)/d {
			return math.MaxUint64
		}
		return periodMs + k*d
	}
	t := store.DecodeTime(max(periodMs, nowMs))
	next := p.Next(t)
	if next.IsZero() || !next.After(t) {
		return math.MaxUint64
	}
	nextMs, _ := store.EncodeTime(next) // 0 before the epoch
	return max(nextMs, max(periodMs, nowMs)+1)
}

// KindConfig configures a kind at registration (see Registry.Register).
// A zero field takes its default.
type KindConfig struct {
	// Retry is the kind's retry policy. The zero RetryPolicy means the
	// default: DefaultRetryPolicy for a service's kind, and for the
	// library's own kinds (a LibraryHandler's reserved ones) retrying for
	// ever, RetryBackoff apart. Any other policy is taken as it is (see
	// RetryPolicy) and fails registration, with an error wrapping
	// store.ErrInvalid, when a field is out of its range.
	Retry RetryPolicy
	// Period, when not nil, makes the kind periodic: its timers are never
	// deleted by their handler's Done, but moved to their next period in
	// the same batch as the handler's outcome, so that each period's fire
	// lands exactly once however many schedulers race or crash. The next
	// period is computed from the schedule and the scheduled time of the
	// period that fired (kept across retries and snoozes), never from when
	// the fire ran, so periods do not drift. Periods missed while nothing
	// ran fire once, late, and the timer then continues from the first
	// period after that fire. A periodic timer that becomes a dead letter
	// leaves its dead letter and moves on to its next period. A schedule
	// with no time after a fire (a cron date that never comes again, a
	// period past the last millisecond) ends the timer: Done deletes it. A
	// Reschedule outcome moves the timer where it says and makes that time
	// the new scheduled one. A producer starts a periodic timer with
	// Schedule, at its first scheduled time. An Every under a millisecond
	// fails registration with store.ErrInvalid.
	Period Period
	// Name names the kind in the logs of the runs that fire it (kind=ship
	// rather than kind=kind(1000)), at most MaxKindName bytes; "" names it
	// as Kind.String does. Name it as the operator's views do
	// (admin.Config.KindNames).
	Name string
}

// MaxKindName bounds KindConfig.Name.
const MaxKindName = 64

// kindConfig is a registered kind's configuration, its defaults filled
// in.
type kindConfig struct {
	retry  RetryPolicy
	period Period
	name   string
}

// kindConfig checks c and returns it with its defaults filled in: those
// of a library kind when reserved.
func (c KindConfig) kindConfig(reserved bool) (kindConfig, error) {
	kc := kindConfig{retry: c.Retry, period: c.Period, name: c.Name}
	if len(c.Name) > MaxKindName {
		return kindConfig{}, fmt.Errorf("timers: KindConfig.Name has %d bytes, at most %d: %w", len(c.Name), MaxKindName, store.ErrInvalid)
	}
	switch {
	case c.Retry == RetryPolicy{} && reserved:
		kc.retry = libraryRetryPolicy
	case c.Retry == RetryPolicy{}:
		kc.retry = DefaultRetryPolicy
	default:
		if err := c.Retry.validate(); err != nil {
			return kindConfig{}, err
		}
	}
	if e, ok := c.Period.(every); ok && time.Duration(e) < time.Millisecond {
		return kindConfig{}, fmt.Errorf("timers: KindConfig.Period: Every(%v) is under a millisecond: %w", time.Duration(e), store.ErrInvalid)
	}
	return kc, nil
}

// truncError is err's text cut to gen.MaxTimerRefV2LastError bytes at a
// rune boundary.
func truncError(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	const maxBytes = gen.MaxTimerRefV2LastError
	if len(s) <= maxBytes {
		return s
	}
	cut := maxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
