package testpath

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSnapshotSeesEveryChange: each change to a path changes its State.
func TestSnapshotSeesEveryChange(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		path   string
		change func() error
	}{
		{"rewrite", file, func() error { return os.WriteFile(file, []byte("ho"), 0o600) }},
		{"chmod", file, func() error { return os.Chmod(file, 0o644) }},
		{"remove", file, func() error { return os.Remove(file) }},
		{"create", file, func() error { return os.WriteFile(file, nil, 0o600) }},
		{"new entry", dir, func() error { return os.Mkdir(filepath.Join(dir, "sub"), 0o700) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := Snapshot(t, tc.path)
			if before != Snapshot(t, tc.path) {
				t.Fatal("two snapshots of an unchanged path differ")
			}
			if err := tc.change(); err != nil {
				t.Fatal(err)
			}
			if before == Snapshot(t, tc.path) {
				t.Errorf("%s: the snapshot did not change", tc.name)
			}
		})
	}
}
