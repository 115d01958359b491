package relay_test

import (
	"time"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// ms is the time n milliseconds encode in stored data (0: the zero Time).
func ms(n uint64) time.Time { return store.DecodeTime(n) }

// msOf is t as stored data holds it, for times a test made valid.
func msOf(t time.Time) uint64 {
	u, err := store.EncodeTime(t)
	if err != nil {
		panic(err)
	}
	return u
}

// retryBackoffMs is timers.RetryBackoff in stored milliseconds.
const retryBackoffMs = uint64(timers.RetryBackoff / time.Millisecond)
