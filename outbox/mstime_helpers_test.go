package outbox_test

import (
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// ms is the time n milliseconds encode in stored data (0: the zero Time).
func ms(n uint64) time.Time { return store.DecodeTime(n) }
