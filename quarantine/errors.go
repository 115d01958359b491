package quarantine

import (
	"errors"

	"github.com/mkit-dev/mkitfdb/store"
)

var (
	// ErrQuarantined: the key is quarantined already; restore it first.
	ErrQuarantined = errors.New("quarantine: the row is quarantined already")
	// ErrNotQuarantined: nothing is quarantined at the key.
	ErrNotQuarantined = errors.New("quarantine: nothing is quarantined at the key")
	// ErrNoRow: there is no row at the key to move aside.
	ErrNoRow = errors.New("quarantine: no row at the key")
	// ErrOccupied: a row is at a key a restore would write (wrapped by an
	// *OccupiedError, which names it).
	ErrOccupied = errors.New("quarantine: a row is at the key again")
)

// OccupiedError is Restore's failure when a row is at the key it would
// put back (the quarantined row's or its companion's): Key and Value are
// that row as read. It matches ErrOccupied with errors.Is.
type OccupiedError struct {
	Key   store.Key
	Value store.Value
}

func (e *OccupiedError) Error() string { return ErrOccupied.Error() }

// Is reports whether target is ErrOccupied.
func (e *OccupiedError) Is(target error) bool { return target == ErrOccupied }
