package admin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/timers"
)

// TestBadInputIsOneLineAndExitTwo: every kind of bad input is refused in
// one line naming the problem, with exit status 2, nothing on stdout and
// nothing written.
func TestBadInputIsOneLineAndExitTwo(t *testing.T) {
	db := fixture(t)
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte("not a database, just text that is long enough to be read as a page header"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.db")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "no command given"},
		{"unknown command", []string{"partitons", "-db", db}, `unknown command "partitons"`},
		{"unknown help topic", []string{"help", "nope"}, `unknown command "nope"`},
		{"unknown flag", []string{"partitions", "-db", db, "-colour"}, "flag provided but not defined: -colour"},
		{"stray argument", []string{"partitions", "-db", db, "extra"}, `unexpected argument "extra"`},
		{"no store", []string{"partitions"}, "name the store"},
		{"two stores", []string{"partitions", "-db", db, "-cluster-file", db}, "name one store"},
		{"missing database", []string{"partitions", "-db", missing}, "no database there"},
		{"a directory", []string{"partitions", "-db", dir}, "a directory is there"},
		{"not a database", []string{"partitions", "-db", notDB}, "is not a database of this library"},
		{"an empty file", []string{"lag", "-db", empty}, "an empty file"},
		{"missing cluster file", []string{"partitions", "-cluster-file", filepath.Join(dir, "fdb.cluster")}, "cluster file " + filepath.Join(dir, "fdb.cluster") + " does not exist"},
		{"partition does not parse", []string{"scan", "-db", db, "-partition", `("orders", 2`}, "-partition does not parse"},
		{"partition not a tuple", []string{"scan", "-db", db, "-partition", "x:zz"}, "-partition does not parse"},
		{"key does not parse", []string{"get", "-db", db, "-partition", adaText, "-key", "(16, five)"}, "-key does not parse"},
		{"unknown class", []string{"scan", "-db", db, "-partition", adaText, "-class", "Nope"}, `-class "Nope" is no key class`},
		{"get without a key", []string{"get", "-db", db, "-partition", adaText}, "-partition and -key are required"},
		{"repair without -yes in a script", []string{"quarantine", "-db", db, "-partition", adaText, "-key", "(16, 2)", "-reason", "r"}, "refusing to write without -yes"},
		{"quarantine without a reason", []string{"quarantine", "-db", db, "-partition", adaText, "-key", "(16, 2)", "-yes"}, "-reason is required"},
		{"quarantine of a record", []string{"quarantine", "-db", db, "-partition", adaText, "-key", `(100, "ada", 9)`, "-reason", "r", "-yes"}, "is OrderKey: quarantine moves rows of the library's queues"},
		{"redrive of no kind", []string{"redrive", "-db", db, "-partition", adaText, "-kind", "nope", "-yes"}, `-kind "nope" is no timer kind`},
	}
	before := snapshot(t, db)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run(t, t0, c.args...)
			if code != ExitUsage || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "mkitfdb: ") {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line with %q", code, errOut, c.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
	if snapshot(t, db) != before {
		t.Error("bad input wrote to the database")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Error("a missing database was created")
	}
}

// TestLockedDatabaseIsNamedWithTheHoldersPid: while a service holds the
// bbolt file (here this process, through a second handle, which bbolt's
// lock treats as another process does), views and repairs are refused
// at once, in one line naming the holder's pid and what to do; once it
// is released, views run.
func TestLockedDatabaseIsNamedWithTheHoldersPid(t *testing.T) {
	db := fixture(t)
	e, err := boltengine.Open(db, boltengine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"partitions", "-db", db},
		{"quarantine", "-db", db, "-partition", adaText, "-key", "(16, 2)", "-reason", "r", "-yes"},
	} {
		code, out, errOut := run(t, t0, args...)
		pid := "pid " + strconv.Itoa(os.Getpid())
		if code != ExitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "locked by another process") ||
			!strings.Contains(errOut, pid) || !strings.Contains(errOut, "stop that process") {
			t.Errorf("%s on a held file: exit %d, stderr %q; want exit 2, one line naming %s", args[0], code, errOut, pid)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, t0, "partitions", "-db", db); code != ExitOK {
		t.Fatalf("after the holder closed: exit %d %s", code, errOut)
	}
	// A view's shared lock keeps a writer out while it reads: bbolt's
	// rule, which the service meets at start.
	r, err := boltengine.Open(db, boltengine.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if code, _, errOut := run(t, t0, "partitions", "-db", db); code != ExitOK {
		t.Errorf("a view beside another reader: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, t0, "redrive", "-db", db, "-partition", adaText, "-kind", "ship", "-ref", "ship/ada/2", "-yes"); code != ExitUsage || !strings.Contains(errOut, "cannot write it") {
		t.Errorf("a repair beside a reader: exit %d %s", code, errOut)
	}
}

// TestClusterFileOpensThroughOpenCluster: -cluster-file opens the store
// through Config.OpenCluster, named with the file it was given, and
// views it as -db views a file; a command without OpenCluster refuses it
// in one line that says where the command that opens clusters is, and
// opens nothing.
func TestClusterFileOpensThroughOpenCluster(t *testing.T) {
	db := fixture(t)
	cluster := filepath.Join(t.TempDir(), "fdb.cluster")
	if err := os.WriteFile(cluster, []byte("test:test@127.0.0.1:4500\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	view := func(openCluster func(string) (kv.Engine, error), args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		c := NewCommand(Config{Name: "mkitfdb", Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
			Clock: clock.NewManual(t0), KindNames: map[timers.Kind]string{kindShip: "ship"}, OpenCluster: openCluster})
		code := c.Run(context.Background(), args)
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := view(nil, "lag", "-cluster-file", cluster)
	if code != ExitUsage || out != "" || strings.Count(errOut, "\n") != 1 ||
		!strings.Contains(errOut, "opens no FoundationDB cluster") || !strings.Contains(errOut, fdbInstall) {
		t.Errorf("-cluster-file without OpenCluster: exit %d, stdout %q, stderr %q; want exit 2 and one line saying %s", code, out, errOut, fdbInstall)
	}

	var opened []string
	openCluster := func(clusterFile string) (kv.Engine, error) {
		opened = append(opened, clusterFile)
		return boltengine.Open(db, boltengine.Config{ReadOnly: true, LockTimeout: boltengine.NoLockWait})
	}
	code, viaCluster, errOut := view(openCluster, "lag", "-cluster-file", cluster)
	if code != ExitOK || len(opened) != 1 || opened[0] != cluster {
		t.Fatalf("-cluster-file with OpenCluster: exit %d %s; opened %q, want [%s]", code, errOut, opened, cluster)
	}
	code, viaFile, errOut := view(nil, "lag", "-db", db)
	if code != ExitOK || viaFile == "" || viaCluster != viaFile {
		t.Errorf("the cluster's view differs from the file's (exit %d %s):\n%s\nwant\n%s", code, errOut, viaCluster, viaFile)
	}

	failing := func(string) (kv.Engine, error) { return nil, errors.New("no client library") }
	if code, _, errOut := view(failing, "lag", "-cluster-file", cluster); code != ExitUsage || !strings.Contains(errOut, "cannot open the cluster of "+cluster+": no client library") {
		t.Errorf("a failing OpenCluster: exit %d, stderr %q", code, errOut)
	}
}

// TestHelp: help lists every command; help <command> and -h print its
// flags on stdout, with exit status 0.
func TestHelp(t *testing.T) {
	code, out, _ := run(t, t0, "help")
	for _, s := range subcommands {
		if code != ExitOK || !strings.Contains(out, "  "+s.name+" ") {
			t.Errorf("help lacks %s:\n%s", s.name, out)
		}
	}
	for _, s := range subcommands {
		for _, args := range [][]string{{"help", s.name}, {s.name, "-h"}} {
			code, out, errOut := run(t, t0, args...)
			if code != ExitOK || errOut != "" || !strings.Contains(out, "usage: mkitfdb "+s.name) || !strings.Contains(out, "-db file") {
				t.Errorf("%v: exit %d %q %q", args, code, out, errOut)
			}
		}
	}
}
