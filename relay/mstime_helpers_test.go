package relay_test

import (
	"time"

	"github.com/mkit-dev/mkitfdb/internal/mstime"
	"github.com/mkit-dev/mkitfdb/timers"
)

// ms and msOf convert the tests' times to and from stored milliseconds.
var ms, msOf = mstime.Time, mstime.Ms

// retryBackoffMs is timers.RetryBackoff in stored milliseconds.
const retryBackoffMs = uint64(timers.RetryBackoff / time.Millisecond)
