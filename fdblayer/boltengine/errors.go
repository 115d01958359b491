package boltengine

import "errors"

// ErrLocked: Open could not take the file's lock in time because another
// handle (another process, or another open in this one) holds it. It
// comes with store.ErrUnavailable: the file is fine and opens once the
// holder closes it.
var ErrLocked = errors.New("boltengine: bbolt file locked by another process")
