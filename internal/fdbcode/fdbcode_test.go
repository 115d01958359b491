package fdbcode

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

func TestTimeoutStaysInTheOptionsRange(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 1},
		{0, 1},
		{time.Millisecond / 2, 1},
		{1500 * time.Millisecond, 1500},
		{time.Duration(math.MaxInt32) * time.Millisecond, math.MaxInt32},
		{30 * 24 * time.Hour, math.MaxInt32},
	} {
		if got := TimeoutMs(c.d); got != c.want {
			t.Errorf("TimeoutMs(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// TestCommitError: the commit errors after which FoundationDB may still
// commit wrap store.ErrUnknownResult; the others do not, and each keeps
// the error it wraps.
func TestCommitError(t *testing.T) {
	for _, tc := range []struct {
		code    int
		unknown bool
	}{
		{NotCommitted, false},
		{TransactionTooOld, false},
		{TransactionTooLarge, false},
		{CommitUnknownResult, true},
		{TransactionCancelled, true},
		{TransactionTimedOut, true},
		{ClusterVersionChanged, true},
	} {
		cause := errors.New(Name(tc.code))
		err := CommitError("fdbengine", tc.code, cause)
		if got := errors.Is(err, store.ErrUnknownResult); got != tc.unknown {
			t.Errorf("code %d: wraps ErrUnknownResult %v, want %v", tc.code, got, tc.unknown)
		}
		if !errors.Is(err, cause) {
			t.Errorf("code %d: the cause is lost: %v", tc.code, err)
		}
	}
}
