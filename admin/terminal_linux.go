package admin

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether r is a terminal (not merely a character
// device: /dev/null is one too), where a repair may ask for
// confirmation.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
