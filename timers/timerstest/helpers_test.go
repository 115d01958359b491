package timerstest_test

import (
	"math"

	"github.com/mkit-dev/mkitfdb/internal/mstime"
)

// ms converts the tests' stored milliseconds to times.
var ms = mstime.Time

// parkedMs is timers.ParkedWake in stored milliseconds.
const parkedMs = uint64(math.MaxUint64)
