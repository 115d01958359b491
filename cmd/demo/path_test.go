package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testpath"
	"github.com/mkit-dev/mkitfdb/store"
)

// TestPathsNotTheDemosAreRefused: anything at -db that is not a database
// an earlier demo wrote, and a path that cannot be used, make demo exit 1
// with one line naming the path and the problem, and stay as they were,
// with -fresh as without.
func TestPathsNotTheDemosAreRefused(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mkdir := func(name string, entries ...string) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.WriteFile(filepath.Join(p, e), []byte(e), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	foreign := filepath.Join(dir, "foreign.bbolt") // a bbolt file of another program
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	others := filepath.Join(dir, "others.db") // this library's, not the demo's
	e, err := boltengine.Open(others, boltengine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := fdblayer.Open(e, fdblayer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(t.Context(), planPartition, store.NewBatch().Put(store.Key("mine"), store.Value("x"))); err != nil {
		t.Fatal(err)
	}
	l.Close()

	for _, tc := range []struct {
		name, path, want string
	}{
		{"text file", file("x.txt", "hi\n"), "is not a database of this demo (not a bbolt database at all)"},
		{"file of two pages of bytes", file("bytes", strings.Repeat("\x5a", 8192)), "is not a database of this demo (not a bbolt database at all)"},
		{"demo database with a damaged header", damaged(t, filepath.Join(dir, "damaged.db")), "is not a database of this demo (a file whose bbolt header fails its checksum: a damaged database, or another program's file)"},
		{"empty file", file("empty", ""), "an empty file, not a database"},
		{"empty directory", mkdir("empty-dir"), "a directory is there"},
		{"non-empty directory", mkdir("full-dir", "a", "b"), "a directory is there"},
		{"bbolt file of another program", foreign, "not a database of this library"},
		{"this library's database, not the demo's", others, "the demo did not write"},
		{"missing directory", filepath.Join(dir, "no-such-dir", "demo.db"), "no-such-dir does not exist"},
	} {
		for _, fresh := range []bool{false, true} {
			name := tc.name
			if fresh {
				name += ", -fresh"
			}
			t.Run(name, func(t *testing.T) {
				args := append([]string{"-db", tc.path}, fast...)
				if fresh {
					args = append(args, "-fresh")
				}
				refused(t, args, tc.path, tc.want)
			})
		}
	}
}

// TestReadOnlyDirectoryIsRefused: a -db in a directory the process may
// not write is refused in one line and nothing is created.
func TestReadOnlyDirectoryIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "probe")
	if f, err := os.Create(probe); err == nil {
		f.Close()
		os.Remove(probe)
		t.Skip("this process may write into a mode 0555 directory (root ignores permission bits), so there is no refusal to test; fdblayer's TestBoltOpenPermissionErrors checks how a refused open is reported")
	}
	refused(t, append([]string{"-db", filepath.Join(dir, "demo.db")}, fast...), dir, "permission denied")
}

// TestLockedDatabaseIsRefusedAtOnce: a database another handle holds is
// refused at once, the database unchanged.
func TestLockedDatabaseIsRefusedAtOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	if code, out, errOut := runDemo(t, t.Context(), append([]string{"-db", db}, fast...)...); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	e, err := boltengine.Open(db, boltengine.Config{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, fresh := range []bool{false, true} {
		args := append([]string{"-db", db}, fast...)
		if fresh {
			args = append(args, "-fresh")
		}
		refused(t, args, db, "locked by another process (pid ")
	}
}

// refused runs demo with args and checks it exits 1 with one line on
// stderr naming path and want, nothing on stdout, and path as it was. The
// line never says "corrupt data": that reads as if the user's file were
// damaged, where it is most likely something else of the user's.
func refused(t *testing.T, args []string, path, want string) {
	t.Helper()
	before := testpath.Snapshot(t, path)
	code, out, errOut := runDemo(t, t.Context(), args...)
	if code != exitFailed || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(errOut, "\n") ||
		!strings.Contains(errOut, path) || !strings.Contains(errOut, want) || strings.Contains(errOut, store.ErrCorrupt.Error()) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and one line naming %s and %q", code, out, errOut, path, want)
	}
	if after := testpath.Snapshot(t, path); after != before {
		t.Errorf("%s changed: exists %v, mode %v, %d bytes, modified %v; was %v, %v, %d bytes, %v",
			path, after.Exists, after.Mode, after.Size, after.ModTime, before.Exists, before.Mode, before.Size, before.ModTime)
	}
}

// damaged writes at path a database the demo made, with one byte of each
// of its two meta pages (bbolt's header) flipped, and returns path.
func damaged(t *testing.T, path string) string {
	t.Helper()
	if code, out, errOut := runDemo(t, t.Context(), append([]string{"-db", path}, fast...)...); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := os.Getpagesize()
	// Each meta page: a 16-byte page header, then the meta; byte 52 of the
	// meta is in its transaction id, which its checksum covers.
	for _, page := range []int{0, pageSize} {
		b[page+16+52] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDatabasePagesAreFull: the demo's keys arrive in order, so the pages
// bbolt splits are filled to the brim (boltOptions): with bbolt's default
// they would stay half empty, and the file twice the size.
func TestDatabasePagesAreFull(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	if code, out, errOut := runDemo(t, t.Context(), "-db", db, "-sources", "2", "-targets", "4", "-rows", "1000", "-nosync"); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	b, err := bolt.Open(db, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.View(func(tx *bolt.Tx) error {
		var s bolt.BucketStats
		if err := tx.ForEach(func(_ []byte, b *bolt.Bucket) error { s.Add(b.Stats()); return nil }); err != nil {
			return err
		}
		fill := float64(s.LeafInuse) / float64(s.LeafAlloc)
		t.Logf("%d keys in %d leaf pages, %.0f%% in use", s.KeyN, s.LeafPageN, 100*fill)
		if fill < 0.8 {
			t.Errorf("leaf pages are %.0f%% full, want at least 80%%", 100*fill)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
