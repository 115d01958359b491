package fdblayer_test

import (
	"github.com/mkit-dev/mkitfdb/internal/mstime"
)

// ms and msOf convert the tests' times to and from stored milliseconds.
var ms, msOf = mstime.Time, mstime.Ms
