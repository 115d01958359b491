package timerstest_test

import (
	"math"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// ms is the time n milliseconds encode (0: the zero Time).
func ms(n uint64) time.Time { return store.DecodeTime(n) }

// parkedMs is timers.ParkedWake in stored milliseconds.
const parkedMs = uint64(math.MaxUint64)
