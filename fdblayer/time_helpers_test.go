package fdblayer_test

import (
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// ms is the time n milliseconds encode (0: the zero Time).
func ms(n uint64) time.Time { return store.DecodeTime(n) }

// msOf is t encoded, for times a test made valid.
func msOf(t time.Time) uint64 {
	u, err := store.EncodeTime(t)
	if err != nil {
		panic(err)
	}
	return u
}
