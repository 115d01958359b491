package concurrency_test

import (
	"github.com/mkit-dev/mkitfdb/internal/mstime"
)

// ms converts the tests' stored milliseconds to times.
var ms = mstime.Time
