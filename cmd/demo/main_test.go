package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/admin"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testlog"
)

// TestMain runs the command itself when DEMO_TEST_MAIN is set, so tests
// can start demo as a second process (os.Args[0] is the test binary).
func TestMain(m *testing.M) {
	if os.Getenv("DEMO_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// runDemo runs demo in this process with args and returns its exit code,
// stdout and stderr.
func runDemo(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := demo(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// fast are flags that keep a test's run small and quick.
var fast = []string{"-sources", "3", "-targets", "4", "-rows", "150", "-workers", "2", "-nosync"}

func TestRunRelaysEveryRowExactlyOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	code, out, errOut := runDemo(t, t.Context(), append([]string{"-db", db}, fast...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	contains(t, out,
		"database: "+db+" (new)",
		"end check over 1 run: 450 rows (1,800 target puts) and 12 high-water marks: every row delivered exactly once",
	)
}

// TestRunAgainResumesAndChecksEveryRun: a second run on a finished
// database adds -rows per source and its end check covers both runs.
func TestRunAgainResumesAndChecksEveryRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	if code, out, errOut := runDemo(t, t.Context(), append([]string{"-db", db}, fast...)...); code != exitOK {
		t.Fatalf("first run: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut := runDemo(t, t.Context(), "-db", db, "-rows", "50", "-nosync")
	if code != exitOK {
		t.Fatalf("second run: exit %d: %s%s", code, out, errOut)
	}
	contains(t, out,
		"(resumed after 1 run: 450 rows relayed and checked; this run adds 50 per source)",
		"plan: 3 sources x 200 rows to 4 targets, run 2",
		"this run queued 150 rows",
		"end check over 2 runs: 600 rows (2,400 target puts) and 12 high-water marks",
	)
}

// TestInterruptedRunResumes: a run whose context ends mid-way prints a
// summary, exits 130 and leaves a database the next run finishes, its end
// check covering the rows of both.
func TestInterruptedRunResumes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	ctx, cancel := context.WithCancel(t.Context())
	w := &cancelOn{cancel: cancel, after: "progress: queued "}
	code := demo(ctx, []string{"-db", db, "-sources", "2", "-rows", "3000", "-nosync", "-progress", "5ms"}, w, w)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d:\n%s", code, exitInterrupted, w)
	}
	contains(t, w.String(), "interrupted after ", "closed cleanly; run again with -db "+db+" to resume")
	// The next run finishes the interrupted one (no -rows more).
	code, out, errOut := runDemo(t, t.Context(), "-db", db, "-rows", "1", "-nosync")
	if code != exitOK {
		t.Fatalf("resumed run: exit %d: %s%s", code, out, errOut)
	}
	contains(t, out,
		"(resumed: the last run was interrupted with ",
		"plan: 2 sources x 3,000 rows to 10 targets, run 2",
		"end check over 2 runs: 6,000 rows (24,000 target puts) and 20 high-water marks",
	)
}

// cancelOn is an output that cancels once it has seen `after`.
type cancelOn struct {
	bytes.Buffer
	after  string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	n, err := c.Buffer.Write(p)
	if strings.Contains(c.String(), c.after) {
		c.cancel()
	}
	return n, err
}

// TestFreshStartsOverOnItsOwnDatabase: -fresh deletes an earlier demo's
// database and starts at run 1.
func TestFreshStartsOverOnItsOwnDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	for i := range 2 {
		code, out, errOut := runDemo(t, t.Context(), append([]string{"-db", db, "-fresh"}, fast...)...)
		if code != exitOK {
			t.Fatalf("run %d: exit %d: %s%s", i, code, out, errOut)
		}
		if !strings.Contains(out, "(new)") || !strings.Contains(out, "end check over 1 run: 450 rows") {
			t.Errorf("run %d did not start over:\n%s", i, out)
		}
	}
}

func TestFlagsAreChecked(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"positional argument", []string{"-db", db, "extra"}, `unexpected argument "extra"`},
		{"empty db", []string{"-db", ""}, "-db is empty"},
		{"no sources", []string{"-sources", "0"}, "-sources 0"},
		{"no targets", []string{"-targets", "0"}, "-targets 0"},
		{"no rows", []string{"-rows", "0"}, "-rows 0"},
		{"too many rows", []string{"-rows", "2000000"}, "-rows 2000000"},
		{"no workers", []string{"-workers", "0"}, "-workers 0"},
		{"zero timeout", []string{"-timeout", "0s"}, "-timeout 0s"},
		{"negative progress", []string{"-progress", "-1s"}, "-progress -1s"},
		{"unknown flag", []string{"-nope"}, "-nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runDemo(t, t.Context(), tc.args...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, exitUsage, tc.want)
			}
		})
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a rejected command line created %s", db)
	}
}

// TestSecondProcessIsToldTheLockAndSignalStopsCleanly: while one demo
// process runs on a database, another is refused at once with the first's
// pid; SIGINT stops the first with a summary and exit 130, and the next
// run resumes it (TestInterruptedRunResumes runs such a resume to its end
// check).
func TestSecondProcessIsToldTheLockAndSignalStopsCleanly(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	cmd, out := startDemo(t, "-db", db, "-sources", "1", "-rows", "1000000", "-nosync", "-progress", "20ms")

	// "locked by another process" is the message of a lock found at once;
	// waiting for it would end in bbolt's timeout instead.
	code, stdout, errOut := runDemo(t, t.Context(), "-db", db)
	want := "locked by another process (pid " + strconv.Itoa(cmd.Process.Pid) + ")"
	if code != exitFailed || !strings.Contains(errOut, want) || strings.Count(errOut, "\n") != 1 || stdout != "" {
		t.Errorf("second demo: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", code, stdout, errOut, want)
	}

	// The operator's command, while the demo holds the file: one line
	// naming the demo's pid, exit 2.
	var aout, aerr bytes.Buffer
	ac := admin.NewCommand(admin.Config{Stdout: &aout, Stderr: &aerr})
	if code := ac.Run(t.Context(), []string{"partitions", "-db", db}); code != admin.ExitUsage || aout.Len() != 0 ||
		!strings.Contains(aerr.String(), want) || strings.Count(aerr.String(), "\n") != 1 {
		t.Errorf("mkitfdb partitions beside the demo: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, aout.String(), aerr.String(), want)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("first demo after SIGINT: %v, want exit %d:\n%s", err, exitInterrupted, out.String())
	}
	if !strings.Contains(out.String(), "closed cleanly; run again") {
		t.Errorf("no summary after SIGINT:\n%s", out.String())
	}
	ctx, cancel := context.WithCancel(t.Context())
	w := &cancelOn{cancel: cancel, after: "plan: "}
	code = demo(ctx, []string{"-db", db, "-nosync"}, w, w)
	if code != exitInterrupted || !strings.Contains(w.String(), "(resumed: the last run was interrupted with ") ||
		!strings.Contains(w.String(), "plan: 1 sources x 1,000,000 rows to 10 targets, run 2") {
		t.Errorf("resumed run: exit %d:\n%s", code, w)
	}
}

// startDemo starts the demo with args as a process of its own (this test
// binary) and waits until it shows progress; the process is killed when
// the test ends.
func startDemo(t *testing.T, args ...string) (*exec.Cmd, *testlog.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "DEMO_TEST_MAIN=1")
	out := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "progress: queued ") {
		if time.Now().After(deadline) {
			t.Fatalf("the demo showed no progress in a minute:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cmd, out
}

// contains fails t for each of wants that out lacks.
func contains(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestKilledProcessResumes: a demo process killed outright (no summary,
// no clean close) leaves a database the next run resumes and finishes,
// its end check covering both runs.
func TestKilledProcessResumes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	cmd, out := startDemo(t, "-db", db, "-sources", "2", "-rows", "1500", "-nosync", "-progress", "5ms")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if strings.Contains(out.String(), "end check") {
		t.Fatalf("the demo finished before it was killed:\n%s", out.String())
	}
	// The operator's view of the killed run's database: consistent.
	parts := adminPartitions(t, db)
	queued := 0
	for _, p := range parts {
		relayTimer := false
		for _, tk := range p.Timers {
			relayTimer = relayTimer || tk.Name == "relay"
		}
		switch {
		case len(p.Corrupt) > 0 || p.Quarantined.N > 0:
			t.Errorf("%s after the kill: corrupt %v, quarantined %v", p.Partition, p.Corrupt, p.Quarantined)
		case p.Relay.Rows.N > 0 && !relayTimer:
			t.Errorf("%s after the kill: %v relay rows queued without a relay timer", p.Partition, p.Relay.Rows)
		case uint64(p.Relay.Rows.N) > p.OutboxSequence:
			t.Errorf("%s after the kill: %v relay rows, more than its sequence %d", p.Partition, p.Relay.Rows, p.OutboxSequence)
		case p.Relay.Rows.N > 0 && (p.Parked || p.Wake != nil && p.Lease != nil && !p.Wake.After(p.Lease.Expires)):
			// The killed run's claim parked it (at most until its lease's
			// expiry): another scheduler takes the lease over.
			if p.Lease == nil {
				t.Errorf("%s after the kill: relay rows queued, parked without the lease that parked it", p.Partition)
			}
		case p.Relay.Rows.N > 0 && (p.Wake == nil || p.Wake.After(time.Now())):
			t.Errorf("%s after the kill: relay rows queued, wake time %v not due and no lease", p.Partition, p.Wake)
		}
		queued += p.Relay.Rows.N
	}
	if queued == 0 {
		t.Logf("the kill found every row delivered (a fast machine); the view was checked all the same")
	}
	code, stdout, errOut := runDemo(t, t.Context(), "-db", db, "-nosync")
	if code != exitOK {
		t.Fatalf("resumed run: exit %d: %s%s", code, stdout, errOut)
	}
	contains(t, stdout,
		"(resumed: the last run was interrupted with ",
		"end check over 2 runs: 3,000 rows (12,000 target puts) and 20 high-water marks",
	)
	for _, p := range adminPartitions(t, db) {
		if p.Relay.Rows.N != 0 || p.Outcomes.Rows != 0 || len(p.Corrupt) != 0 {
			t.Errorf("%s after the resumed run: relay rows %v, outcomes %d, corrupt %v; want empty queues", p.Partition, p.Relay.Rows, p.Outcomes.Rows, p.Corrupt)
		}
	}
}

// adminPartitions runs mkitfdb partitions -json on db.
func adminPartitions(t *testing.T, db string) []admin.PartitionReport {
	t.Helper()
	var out, errOut bytes.Buffer
	c := admin.NewCommand(admin.Config{Stdout: &out, Stderr: &errOut})
	if code := c.Run(t.Context(), []string{"partitions", "-db", db, "-json"}); code != admin.ExitOK {
		t.Fatalf("mkitfdb partitions: exit %d: %s", code, errOut.String())
	}
	var v struct{ Partitions []admin.PartitionReport }
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("mkitfdb partitions -json: %v", err)
	}
	if len(v.Partitions) == 0 {
		t.Fatalf("mkitfdb partitions lists none:\n%s", out.String())
	}
	return v.Partitions
}
