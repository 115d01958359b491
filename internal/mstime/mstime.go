// Package mstime converts the library's tests' times to and from the
// milliseconds stored data holds (store.EncodeTime, store.DecodeTime), so
// that a test can write a time as the number it is stored as.
package mstime

import (
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// Time is the time n milliseconds encode in stored data (0: the zero Time).
func Time(n uint64) time.Time { return store.DecodeTime(n) }

// Ms is t as stored data holds it. It panics for a time stored data cannot
// hold (before the Unix epoch): a test's times are valid.
func Ms(t time.Time) uint64 {
	u, err := store.EncodeTime(t)
	if err != nil {
		panic(err)
	}
	return u
}
