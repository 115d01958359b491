package evolve

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mkit-dev/mkitfdb/store"
)

// ErrNewerFormat is wrapped by the error of OpenGate for a store whose
// format of a namespace the binary links is newer than the binary knows,
// and by the error of every write a fenced store refuses (see Gate). It is
// store.ErrNewerFormat, so it wraps store.ErrUnavailable: nothing was
// written, and the process must be replaced by a binary that knows the
// format.
var ErrNewerFormat = store.ErrNewerFormat

// ErrRaiseRefused is wrapped by the error of a raise the store refuses as
// it is (a *RaiseError says why): a live process does not know the format,
// the namespace is not one format below it, a process row does not
// decode. Nothing was written.
var ErrRaiseRefused = errors.New("format raise refused")

// NewerFormatError is the error of a store whose format of a namespace is
// above the newest its binary knows: at open, or after the format was
// raised while the process ran (Fenced). It wraps ErrNewerFormat.
type NewerFormatError struct {
	Namespace  string
	Format     uint32 // the store's format of Namespace
	Known      uint32 // the newest this binary knows
	ImportPath string // the package that declares Namespace in this binary
	// Fenced: the format was raised while the process ran; its writes are
	// refused from then on.
	Fenced bool
	// Row is the decoding error of a format row of a version this binary
	// does not read (a newer binary wrote it; Format is then 0).
	Row error
}

func (e *NewerFormatError) Error() string {
	knows := fmt.Sprintf("formats 1-%d", e.Known)
	if e.Known == 1 {
		knows = "format 1"
	}
	if e.Row != nil {
		return fmt.Sprintf("the store format row of namespace %q was written by a newer binary (%v); this binary knows %s (%s): deploy a newer binary",
			e.Namespace, e.Row, knows, e.ImportPath)
	}
	if e.Fenced {
		return fmt.Sprintf("store format of namespace %q was raised to %d; this binary knows %s (%s): writes refused until this process is replaced by a binary that knows %d",
			e.Namespace, e.Format, knows, e.ImportPath, e.Format)
	}
	return fmt.Sprintf("store format of namespace %q is %d; this binary knows %s (%s): deploy a binary that knows %d",
		e.Namespace, e.Format, knows, e.ImportPath, e.Format)
}

// Unwrap returns ErrNewerFormat.
func (e *NewerFormatError) Unwrap() error { return ErrNewerFormat }

// RaiseError is the error of a raise the store refuses. It wraps
// ErrRaiseRefused.
type RaiseError struct {
	Namespace string
	Format    uint32 // the store's format of Namespace when the raise read it
	To        uint32 // the format asked for
	// Unaware are the live processes that do not know To (or whose row
	// does not decode, Known empty): without RaiseConfig.Force the raise
	// waits for them to stop.
	Unaware []Process
}

func (e *RaiseError) Error() string {
	switch {
	case e.To <= e.Format:
		return fmt.Sprintf("namespace %q is at format %d already: a format is raised once and never lowered", e.Namespace, e.Format)
	case e.To > e.Format+1:
		return fmt.Sprintf("namespace %q is at format %d: a raise goes one format at a time (to %d first)", e.Namespace, e.Format, e.Format+1)
	}
	names := make([]string, len(e.Unaware))
	for i, p := range e.Unaware {
		switch {
		case p.Err != nil:
			names[i] = fmt.Sprintf("%s (row does not decode: %v)", p.Name, p.Err)
		default:
			names[i] = fmt.Sprintf("%s (knows %d)", p.Name, p.Known[e.Namespace])
		}
	}
	return fmt.Sprintf("namespace %q stays at format %d: %d live processes do not know format %d: %s; stop or replace them (or force the raise past processes known to be dead)",
		e.Namespace, e.Format, len(e.Unaware), e.To, strings.Join(names, ", "))
}

// Unwrap returns ErrRaiseRefused.
func (e *RaiseError) Unwrap() error { return ErrRaiseRefused }
