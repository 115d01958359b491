package store

import (
	"fmt"
	"math"
	"time"
)

// Times in stored data.
//
// The store's resolution is the millisecond: a time.Time the store keeps
// (a Wakeup's time, a DueEntry's, a timer's due time) is encoded as the
// whole milliseconds since the Unix epoch, truncated, and reads back as
// time.UnixMilli of them. The zero Time means none where a time is
// optional, and encodes as 0, as the Unix epoch itself does; MaxTime and
// any later time encode as the largest encoding. A time before the Unix
// epoch is refused with ErrInvalid.

// MaxTime is the latest time the store tells apart: EncodeTime maps it,
// and every later time, to the largest encoding, and DecodeTime maps that
// back to MaxTime.
var MaxTime = time.UnixMilli(math.MaxInt64)

var epoch = time.Unix(0, 0)

// EncodeTime returns the encoding of t in stored data: the milliseconds
// since the Unix epoch, truncated; 0 for the zero Time; math.MaxUint64 for
// MaxTime and later. It fails with an error wrapping ErrInvalid for a time
// before the Unix epoch.
func EncodeTime(t time.Time) (uint64, error) {
	if t.IsZero() {
		return 0, nil
	}
	switch {
	case t.Before(epoch):
		return 0, fmt.Errorf("%w: time %s is before the Unix epoch", ErrInvalid, t.UTC().Format(time.RFC3339Nano))
	case !t.Before(MaxTime):
		return math.MaxUint64, nil
	}
	return uint64(t.UnixMilli()), nil
}

// DecodeTime returns the time that encoding u in stored data holds: the
// zero Time for 0, MaxTime for an encoding beyond it, time.UnixMilli(u)
// otherwise. EncodeTime(DecodeTime(u)) is u for every u up to
// math.MaxInt64 - 1 and for math.MaxUint64.
func DecodeTime(u uint64) time.Time {
	switch {
	case u == 0:
		return time.Time{}
	case u >= math.MaxInt64:
		return MaxTime
	}
	return time.UnixMilli(int64(u))
}

// encodeTime is EncodeTime for a time already checked.
func encodeTime(t time.Time) uint64 {
	u, _ := EncodeTime(t)
	return u
}
