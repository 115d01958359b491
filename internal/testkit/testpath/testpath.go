// Package testpath holds what this module's tests share to check that a
// command or an open left a path as it was.
package testpath

import (
	"io/fs"
	"os"
	"testing"
	"time"
)

// State is what Snapshot saw at a path. Two equal States mean nothing at
// the path was created, removed, written, renamed or re-moded between them
// (a directory's entries are compared by name, a file by its bytes).
type State struct {
	Exists  bool
	Mode    fs.FileMode
	Size    int64
	ModTime time.Time
	Data    string // a regular file's bytes; a directory's entry names
}

// Snapshot returns the State of path, following symlinks; a path that
// does not exist has the zero State. A read that fails fails t.
func Snapshot(t testing.TB, path string) State {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		return State{}
	}
	s := State{Exists: true, Mode: fi.Mode(), Size: fi.Size(), ModTime: fi.ModTime()}
	switch {
	case fi.IsDir():
		entries, err := os.ReadDir(path)
		if err != nil {
			t.Fatalf("testpath: %v", err)
		}
		for _, e := range entries {
			s.Data += e.Name() + "\n"
		}
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("testpath: %v", err)
		}
		s.Data = string(b)
	}
	return s
}
