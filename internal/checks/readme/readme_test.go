package readme

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/store"
)

// root is the repository root (this package is internal/checks/readme).
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func readme(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runEnv, set to 1, makes the tests run the README's commands; make
// test-readme sets it, and make test runs make test-readme after the race
// tests. Without it they check only that every command is covered: go
// test ./... stays fast, and runs no benchmark, fuzzing or demo.
const runEnv = "MKITFDB_README_COMMANDS"

// skipUnlessRun skips t unless runEnv asks for the README's commands to be
// run.
func skipUnlessRun(t *testing.T) {
	t.Helper()
	if os.Getenv(runEnv) != "1" {
		t.Skipf("runs the README's commands only with %s=1 (make test-readme, which make test runs)", runEnv)
	}
}

// how says what runs one README command: a test of this file (run),
// CI (.ci/run), or nothing here, for a stated reason.
type how struct {
	run    func(t *testing.T, cmd string)
	ci     bool
	reason string // why no test runs it
}

// quickStart marks the commands TestQuickStart runs.
var quickStart = how{run: func(t *testing.T, _ string) { t.Skip("run by TestQuickStart") }}

// byCommand is every shell command of the README and what runs it.
// TestEveryREADMECommandIsRun fails for a README command missing here and
// for an entry the README no longer has.
var byCommand = map[string]how{
	"go run ./cmd/demo": {run: runDemo},
	"make test":         {ci: true},

	"go mod init example.com/myservice": quickStart,
	"go mod edit -require=github.com/mkit-dev/mkitfdb@v0.0.0 -replace=github.com/mkit-dev/mkitfdb=../mkitfdb": quickStart,
	"go mod edit -tool=github.com/mkit-dev/mkitfdb/cmd/codegen":                                               quickStart,
	"go generate ./...": quickStart,
	"go mod tidy":       quickStart,
	"go run .":          quickStart,

	"(cd bench/codecs && go test -run '^$' -bench Compare -count 6)":                                        {run: runOnce},
	"go test -run '^$' -bench 'MemoryApplyGuarded/pair' -count 6 ./fdblayer":                                {run: runOnce},
	"go test -run '^$' -bench 'RelayVsBaseline/memory' -count 10 ./bench":                                   {run: runOnce},
	"go test -run '^$' -bench 'RelayWorkers/engine=mvcc-latency/workers=1$' -benchtime 5x -count 1 ./bench": {run: runOnce},
	"go test -run '^$' -bench RelayWindowRoundTrips -benchtime 5x ./bench":                                  {run: runOnce},
	"(cd bench/river && go test -run '^$' -bench 'FireDue|Insert' -benchtime 2x -count 1 -timeout 60m)": {
		reason: "fires and inserts up to 10,000 timers and works 10,000 River jobs per op, minutes of fsyncs; make test runs the same harness on 100 of each (bench/river's TestEachFiresEveryItemExactlyOnce)",
	},
	"go test -run '^$' -bench 'SchedulerTickScaling' -benchtime 200x -count 10 ./timers":                              {run: runOnce},
	"go test -run '^$' -bench 'SchedulerRoundTrips|SchedulerCommits' -benchtime 20x ./timers":                         {run: runOnce},
	"go test -run '^$' -bench 'SchedulerWorkers/engine=mvcc-latency$' -benchtime 3x -count 6 ./bench/":                {run: runOnce},
	"go test -run '^$' -bench 'WatermarkScaling' -count 6 ./watermark":                                                {run: runOnce},
	"go test -run '^$' -bench 'Watermark$' -count 6 ./watermark":                                                      {run: runOnce},
	"go test -run '^$' -bench 'DeliveryFire|DeliveryRoundTrips' -benchmem -count 6 ./outcome":                         {run: runOnce},
	"go test -run '^$' -bench 'TimerRefKeyValues|^BenchmarkU64Value$|^BenchmarkTimerRefV2$' -benchmem -count 6 ./gen": {run: runOnce},

	`go run ./refdomain/cmd/refdomain-admin partitions -db "${TMPDIR:-/tmp}/mkitfdb-demo.db"`: {run: runOperator},
	"go run ./cmd/mkitfdb help quarantine":                                                    {run: runOperator},

	"make lint":        {ci: true}, // make test's first prerequisite
	"make test-readme": {ci: true}, // make test's last step
	"make generate":    {run: runGenerate},
	"make fuzz":        {run: runFuzz},
	"make bench":       {run: runOnce},
	"make test-fdb":    {run: runTestFDB},
	"FDB_CLUSTER_FILE=/etc/foundationdb/fdb.cluster go -C fdblayer/fdbengine test ./...": {
		reason: "needs a FoundationDB cluster and libfdb_c; make test-fdb runs the same tests where FoundationDB is installed, and make lint vets the fdbengine module",
	},
}

// TestEveryREADMECommandIsRun: each shell command of the README is run
// here, or is make test (which .ci/run runs, exactly) or a target make
// test runs, or is listed with the reason nothing here can run it. The
// commands themselves run only with runEnv set (make test-readme); without
// it, this checks that each is covered, and that the make targets CI is
// said to run are run by make test.
func TestEveryREADMECommandIsRun(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range Blocks(readme(t)) {
		if b.Lang != "sh" {
			continue
		}
		for _, cmd := range b.Commands() {
			seen[cmd] = true
			h, ok := byCommand[cmd]
			if !ok {
				t.Errorf("README.md:%d: %q is run by no test: add it to byCommand in internal/checks/readme", b.Line, cmd)
				continue
			}
			t.Run(cmd, func(t *testing.T) {
				switch {
				case h.ci:
					checkCI(t, cmd)
				case h.run != nil:
					skipUnlessRun(t)
					// The commands are independent (each demo and
					// quick start in a directory of its own), and many
					// wait rather than compute (builds, the benchmarks'
					// injected latency): side by side, up to go test's
					// -parallel (make test-readme sets it).
					t.Parallel()
					h.run(t, cmd)
				default:
					t.Skipf("not run: %s", h.reason)
				}
			})
		}
	}
	for cmd := range byCommand {
		if !seen[cmd] {
			t.Errorf("byCommand lists %q, which the README no longer has", cmd)
		}
	}
}

// checkCI checks that .ci/run's command is exactly `make test`, and that
// another make target it names is one make test runs: a prerequisite of
// the test rule, or a $(MAKE) line of its recipe.
func checkCI(t *testing.T, cmd string) {
	ci, err := os.ReadFile(filepath.Join(root(t), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	if last := lines[len(lines)-1]; last != "make test" {
		t.Fatalf(".ci/run ends with %q, not the README's `make test`", last)
	}
	if cmd == "make test" {
		return
	}
	target := strings.TrimPrefix(cmd, "make ")
	mk, err := os.ReadFile(filepath.Join(root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`(?m)^test:.*\n(\t.*\n)*`).Find(mk)
	if rule == nil {
		t.Fatal("the Makefile has no test rule")
	}
	prereq := regexp.MustCompile(`\A[^\n]*[ :]` + regexp.QuoteMeta(target) + `( |\n)`)
	recipe := regexp.MustCompile(`(?m)^\t\$\(MAKE\)( -\S+)* ` + regexp.QuoteMeta(target) + `$`)
	if !prereq.Match(rule) && !recipe.Match(rule) {
		t.Errorf("make test does not run %s, so CI does not run it:\n%s", target, rule)
	}
}

// command runs name with args in dir (the repository root when empty),
// with extra environment, and returns its combined output; a failure
// fails t with the output. A command still running a minute before the
// test binary's deadline (go test -timeout) is killed and fails t, so
// that the failure names the command and shows its output.
func command(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	if dir == "" {
		dir = root(t)
	}
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Minute))
		defer cancel()
	}
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	c.WaitDelay = 5 * time.Second
	out, err := c.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: killed a minute before the test deadline (%v); output so far:\n%s", name, strings.Join(args, " "), err, out)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runDemo runs the demo exactly as the README says, with its default
// database in a temporary directory of its own.
func runDemo(t *testing.T, cmd string) {
	out := command(t, "", []string{"TMPDIR=" + t.TempDir()}, "sh", "-c", cmd)
	if !strings.Contains(out, "every row delivered exactly once") {
		t.Errorf("%s printed no passed end check:\n%s", cmd, out)
	}
}

// runOperator runs an operator's command as the README says, on the
// database a short demo run leaves where the README's demo leaves it.
func runOperator(t *testing.T, cmd string) {
	tmp := []string{"TMPDIR=" + t.TempDir()}
	command(t, "", tmp, "go", "run", "./cmd/demo", "-sources", "2", "-targets", "3", "-rows", "40", "-nosync")
	out := command(t, "", tmp, "sh", "-c", cmd)
	want := []string{"usage: mkitfdb quarantine"}
	if strings.Contains(cmd, " partitions ") {
		// The demo's source partitions, told apart by the reference
		// domain's schema, which the command links.
		want = []string{"partitions\n", `("refdomain", 1, "demo", "repo-0000", "refs/heads/main")`}
		if strings.Contains(out, `not linked: ("refdomain")`) {
			t.Errorf("%s does not link the reference domain:\n%s", cmd, out)
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s printed no %q:\n%s", cmd, w, out)
		}
	}
}

// runOnce runs a benchmark command for one iteration of one count: its
// -benchtime is dropped and its -count becomes -benchtime 1x -count 1
// (make bench gets BENCHTIME=1x BENCHCOUNT=1, every benchmark of every
// package once). The figures need the full command; this proves that it
// runs and selects a benchmark, and is as short as that allows.
func runOnce(t *testing.T, cmd string) {
	if cmd == "make bench" {
		command(t, "", nil, "make", "bench", "BENCHTIME=1x", "BENCHCOUNT=1")
		return
	}
	once := regexp.MustCompile(`-benchtime \S+ `).ReplaceAllString(cmd, "")
	once = regexp.MustCompile(`-count \d+`).ReplaceAllString(once, "-benchtime 1x -count 1")
	if once == cmd {
		t.Fatalf("%q has no -count to replace", cmd)
	}
	out := command(t, "", nil, "sh", "-c", once)
	if !strings.Contains(out, "\nBenchmark") {
		t.Errorf("%s ran no benchmark:\n%s", once, out)
	}
}

// runGenerate checks make generate is go generate ./..., and runs the
// generator over the repository's schemas in -check mode (what make
// generate would write is what is committed).
func runGenerate(t *testing.T, _ string) {
	// --no-print-directory: under make test this make is a sub-make, which
	// would otherwise print the directories it enters and leaves.
	if out := command(t, "", nil, "make", "-n", "--no-print-directory", "generate"); strings.TrimSpace(out) != "go generate ./..." {
		t.Errorf("make generate runs %q, not go generate ./...", out)
	}
	command(t, "", nil, "go", "run", "./cmd/codegen", "-schema", "schema", "-out", "gen", "-pkg", "gen", "-check")
}

// runFuzz runs make fuzz with a tiny count budget on one package,
// codec/wire, whose fuzz target has no dependency in this module to build
// with coverage instrumentation: it proves the target finds and runs fuzz
// targets (scripts/fuzz.sh); the fuzz targets of every package run on
// their seed corpora in go test ./....
func runFuzz(t *testing.T, _ string) {
	out := command(t, "", nil, "make", "fuzz", "FUZZTIME=20x", "FUZZPKG=./codec/wire")
	if !strings.Contains(out, "fuzz github.com/mkit-dev/mkitfdb/codec/wire Fuzz") {
		t.Errorf("make fuzz ran no fuzz target:\n%s", out)
	}
}

// runTestFDB runs make test-fdb where FoundationDB is not installed: it
// must say so in one line and exit 1.
func runTestFDB(t *testing.T, _ string) {
	if _, err := exec.LookPath("fdbserver"); err == nil {
		t.Skip("FoundationDB is installed: make test-fdb would run the whole suite; run it yourself")
	}
	c := exec.Command("make", "-s", "test-fdb")
	c.Dir = root(t)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("make test-fdb without FoundationDB: %v, want a failure", err)
	}
	if msg := stderr.String(); !strings.Contains(msg, "test-fdb: FoundationDB server/client packages are not installed") {
		t.Errorf("make test-fdb said %q", msg)
	}
}

// TestREADMELimitsAreCapabilities: the limits the README states are what
// Capabilities reports, on every engine that runs here.
func TestREADMELimitsAreCapabilities(t *testing.T) {
	re := regexp.MustCompile(`keys up to ([\d,]+) bytes,\s+values up to ([\d,]+) bytes, batches up to ([\d,]+) operations \(configurable\) and ([\d,]+)\s+bytes,[^;]*;\s+scan pages up to\s+([\d,]+) bytes after their first row, and the reads of one transaction up to ([\d,]+)\s+bytes[^;]*;\s+a commit of several partitions \(` + "`store.Commit`" + `\) up to ([\d,]+)\s+batches, ([\d,]+) operations and ([\d,]+) bytes`)
	m := re.FindSubmatch(readme(t))
	if m == nil {
		t.Fatalf("README.md states no limits matching %s", re)
	}
	num := func(b []byte) int {
		n, err := strconv.Atoi(strings.ReplaceAll(string(b), ",", ""))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	bolt, err := boltengine.Open(filepath.Join(t.TempDir(), "caps.db"), boltengine.Config{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]kv.Engine{"memory": memengine.New(), "bbolt": bolt} {
		l, err := fdblayer.Open(e, fdblayer.Config{})
		if err != nil {
			t.Fatal(err)
		}
		got := l.Capabilities()
		want := store.Capabilities{MaxKeyBytes: num(m[1]), MaxValueBytes: num(m[2]), MaxBatchOps: num(m[3]), MaxBatchBytes: num(m[4]),
			MaxScanBytes: num(m[5]), MaxTransactReadBytes: num(m[6]),
			MaxCommitBatches: num(m[7]), MaxCommitOps: num(m[8]), MaxCommitBytes: num(m[9])}
		got.ReservedBatchOps = 0
		if got != want {
			t.Errorf("%s: Capabilities() = %+v; README.md says %+v", name, got, want)
		}
		l.Close()
	}
}

// TestQuickStart builds the README's quick start as a module of its own,
// in the README's order: each file written and each command run verbatim
// when the README comes to it, in a directory beside a clone of the
// library (a link named mkitfdb to this checkout, as `git clone` names
// it). It checks that the last command prints what the README says. The
// module's other dependencies come from the module proxy, as go mod tidy
// always does. Without runEnv it only checks that the quick start has its
// commands, files and output, and that byCommand marks its commands.
func TestQuickStart(t *testing.T) {
	// A step writes a file (name set) or runs a command.
	type step struct{ name, text, cmd string }
	var (
		steps       []step
		cmds, files int
		want        string
	)
	for _, b := range Blocks(readme(t)) {
		if !strings.HasPrefix(b.Section, "Quick start") {
			continue
		}
		switch b.Lang {
		case "sh":
			for _, cmd := range b.Commands() {
				steps = append(steps, step{cmd: cmd})
				cmds++
				if byCommand[cmd].run == nil {
					t.Errorf("quick start command %q is not marked in byCommand", cmd)
				}
			}
		case "go":
			if name, text, ok := b.File(); ok {
				steps = append(steps, step{name: name, text: text})
				files++
			}
		case "text":
			want = strings.Join(b.Lines, "\n") + "\n"
		}
	}
	if cmds == 0 || files == 0 || want == "" {
		t.Fatalf("the README's quick start has %d commands, %d files and output %q", cmds, files, want)
	}
	skipUnlessRun(t)
	beside := t.TempDir()
	if err := os.Symlink(root(t), filepath.Join(beside, "mkitfdb")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(beside, "myservice")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var got string
	for _, st := range steps {
		if st.name == "" {
			got = command(t, dir, nil, "sh", "-c", st.cmd)
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(st.name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(st.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got != want {
		t.Errorf("the quick start's last command printed\n%s\nthe README says\n%s", got, want)
	}
}
