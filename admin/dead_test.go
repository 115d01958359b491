package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

const region1Text = `("orders", 1, 1)`

// shipFailer fails region 1's ship timers: "ship/r1/7" permanently, the
// others with a retryable error.
type shipFailer struct{}

func (shipFailer) Kind() timers.Kind { return kindShip }

func (shipFailer) Fire(_ context.Context, _ *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	if t.Reference == "ship/r1/7" {
		return nil, timers.Permanent(errors.New("no such address"))
	}
	return nil, errors.New("carrier unavailable")
}

// deadFixture is the fixture with three dead letters in region 1: ship
// timers that failed half an hour ago, one permanently, one on its only
// attempt, and that one's earlier dead letter.
func deadFixture(t *testing.T) string {
	t.Helper()
	path := fixture(t)
	l := openBolt(t, path)
	defer l.Close()
	reg := &timers.Registry{}
	if err := reg.Register(shipFailer{}, timers.KindConfig{Retry: timers.RetryPolicy{InitialInterval: time.Second, BackoffFactor: 1, MaxInterval: time.Second, MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(-30 * time.Minute)
	for i, tm := range []timers.Timer{
		{Kind: kindShip, Reference: "ship/r1/7", DueAt: t0.Add(-time.Hour), Value: []byte("box 7")},
		{Kind: kindShip, Reference: "ship/r1/8", DueAt: t0.Add(-time.Hour), Value: []byte("box 8")},
		{Kind: kindShip, Reference: "ship/r1/8", DueAt: t0.Add(-45 * time.Minute), Value: []byte("box 8, again")},
	} {
		schedule(t, l, region1, tm)
		rep, err := timers.RunDue(context.Background(), l, region1, reg, at, timers.RunConfig{Clock: clock.NewManual(at), Logger: slog.New(slog.DiscardHandler)})
		if err != nil || rep.DeadLettered != 1 {
			t.Fatalf("dead letter %d: %+v %v", i, rep, err)
		}
	}
	// And one that failed once, retrying in a minute.
	retry := &timers.Registry{}
	if err := retry.Register(shipFailer{}, timers.KindConfig{Retry: timers.RetryPolicy{InitialInterval: time.Minute, BackoffFactor: 1, MaxInterval: time.Minute, MaxAttempts: 5}}); err != nil {
		t.Fatal(err)
	}
	schedule(t, l, region1, timers.Timer{Kind: kindShip, Reference: "ship/r1/9", DueAt: t0, Value: []byte("box 9")})
	rep, err := timers.RunDue(context.Background(), l, region1, retry, t0, timers.RunConfig{Clock: clock.NewManual(t0), Logger: slog.New(slog.DiscardHandler)})
	if err != nil || rep.Failed != 1 {
		t.Fatalf("retrying timer: %+v %v", rep, err)
	}
	return path
}

// TestTimersShowARetryingTimersAttempts: the timers view notes a timer's
// failed attempts and last error.
func TestTimersShowARetryingTimersAttempts(t *testing.T) {
	db := deadFixture(t)
	code, out, errOut := run(t, t0, "timers", "-db", db, "-partition", region1Text)
	if code != ExitOK {
		t.Fatalf("exit %d %s", code, errOut)
	}
	golden(t, "timers-retrying.txt", out)
}

// TestGoldenDeadLetters: timers -dead, in text and JSON, for the store and
// for one partition.
func TestGoldenDeadLetters(t *testing.T) {
	db := deadFixture(t)
	for _, v := range []struct {
		name string
		args []string
	}{
		{"timers-dead", []string{"timers", "-db", db, "-dead"}},
		{"timers-dead-ada", []string{"timers", "-db", db, "-dead", "-partition", adaText}},
	} {
		t.Run(v.name, func(t *testing.T) {
			code, out, errOut := run(t, t0, v.args...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, v.name+".txt", out)
			code, js, errOut := run(t, t0, append(v.args, "-json")...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("-json: exit %d, stderr %q", code, errOut)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, []byte(js), "", "  "); err != nil {
				t.Fatalf("-json does not parse: %v\n%s", err, js)
			}
			golden(t, v.name+".json", pretty.String())
		})
	}
	code, _, errOut := run(t, t0, "timers", "-db", db, "-dead", "-due")
	if code != ExitUsage || !strings.Contains(errOut, "never due") {
		t.Errorf("-dead -due: exit %d %q", code, errOut)
	}
}

// deadRows lists region 1's dead letters as the JSON view has them.
func deadRows(t *testing.T, db string) []DeadLetterRow {
	t.Helper()
	_, js, _ := run(t, t0, "timers", "-db", db, "-dead", "-partition", region1Text, "-json")
	var v struct {
		DeadLetters []DeadLetterRow `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	return v.DeadLetters
}

// TestRedriveAndDeleteADeadLetter: redrive -dead makes a dead letter a
// timer due now (then listed as due, the due index right), refusing while
// a timer of its identity exists and asking for -due when there are
// several; delete-dead deletes one, printing what it held; each refuses a
// dead letter that changed between its read and its batch, and writes
// nothing without -yes in a script.
func TestRedriveAndDeleteADeadLetter(t *testing.T) {
	db := deadFixture(t)
	if got := len(deadRows(t, db)); got != 3 {
		t.Fatalf("%d dead letters, want 3", got)
	}
	before := snapshot(t, db)
	code, _, errOut := run(t, t0, "redrive", "-db", db, "-partition", region1Text, "-dead", "-kind", "ship", "-ref", "ship/r1/7")
	if code != ExitUsage || !strings.Contains(errOut, "without -yes") {
		t.Errorf("without -yes: exit %d %q", code, errOut)
	}
	code, _, errOut = run(t, t0, "redrive", "-db", db, "-partition", region1Text, "-dead", "-kind", "ship", "-ref", "ship/r1/8", "-yes")
	if code != ExitUsage || !strings.Contains(errOut, "pick one with -due (2026-03-01T11:00:00.000Z, 2026-03-01T11:15:00.000Z)") {
		t.Errorf("two dead letters: exit %d %q", code, errOut)
	}
	code, _, errOut = run(t, t0, "redrive", "-db", db, "-partition", region1Text, "-kind", "ship", "-ref", "ship/r1/8", "-due", "2026-03-01T11:00:00.000Z", "-yes")
	if code != ExitUsage || !strings.Contains(errOut, "give -dead too") {
		t.Errorf("-due without -dead: exit %d %q", code, errOut)
	}
	if snapshot(t, db) != before {
		t.Fatal("a refused repair wrote")
	}

	code, out, errOut := run(t, t0, "redrive", "-db", db, "-partition", region1Text, "-dead", "-kind", "ship", "-ref", "ship/r1/7", "-yes")
	if code != ExitOK || !strings.Contains(out, `last error: "no such address"`) || !strings.Contains(out, "after 1 attempts, the last permanent") {
		t.Fatalf("redrive -dead: exit %d\n%s%s", code, out, errOut)
	}
	_, out, _ = run(t, t0, "timers", "-db", db, "-partition", region1Text, "-due", "-json")
	if !strings.Contains(out, `"reference":"ship/r1/7"`) || !strings.Contains(out, `"state":"due"`) {
		t.Errorf("the re-driven dead letter is not a timer due now: %s", out)
	}
	if got := len(deadRows(t, db)); got != 2 {
		t.Errorf("%d dead letters after the redrive, want 2", got)
	}

	// A timer of the identity exists now: a second dead letter of it
	// cannot be re-driven over it. (ship/r1/8 has none: redrive one of
	// its, then try the other.)
	code, _, errOut = run(t, t0, "redrive", "-db", db, "-partition", region1Text, "-dead", "-kind", "ship", "-ref", "ship/r1/8", "-due", "2026-03-01T11:00:00.000Z", "-yes")
	if code != ExitOK {
		t.Fatalf("redrive the first of two: exit %d %q", code, errOut)
	}
	code, _, errOut = run(t, t0, "redrive", "-db", db, "-partition", region1Text, "-dead", "-kind", "ship", "-ref", "ship/r1/8", "-yes")
	if code != ExitFailed || !strings.Contains(errOut, "TimerRefKey") || !strings.Contains(errOut, "changed since it was read") {
		t.Errorf("redrive over a live timer: exit %d %q", code, errOut)
	}

	// delete-dead, with the dead letter deleted by another operator
	// between the read and the batch: refused.
	var c *Command
	var stdout, stderr bytes.Buffer
	c = NewCommand(Config{Name: "mkitfdb", Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Clock: clock.NewManual(t0), KindNames: map[timers.Kind]string{kindShip: "ship"}})
	c.onOpen = func(st *opened) {
		c.beforeApply = func() {
			dls, _, err := timers.DeadLetters(context.Background(), store.ReaderOf(st.layer, region1), nil, 10)
			if err != nil || len(dls) != 1 {
				t.Fatalf("dead letters: %v %v", dls, err)
			}
			b := store.NewBatch()
			if err := timers.DeleteDeadLetter(b, dls[0]); err != nil {
				t.Fatal(err)
			}
			if out, err := st.layer.Apply(context.Background(), region1, b); err != nil || !out.Committed() {
				t.Fatal(out, err)
			}
		}
	}
	code = c.Run(context.Background(), []string{"delete-dead", "-db", db, "-partition", region1Text, "-kind", "ship", "-ref", "ship/r1/8", "-yes"})
	if code != ExitFailed || !strings.Contains(stderr.String(), "DeadLetterKey") {
		t.Errorf("delete-dead of a dead letter deleted meanwhile: exit %d %q", code, stderr.String())
	}
	if got := len(deadRows(t, db)); got != 0 {
		t.Errorf("%d dead letters, want 0 (the other operator's delete)", got)
	}
	code, _, errOut = run(t, t0, "delete-dead", "-db", db, "-partition", region1Text, "-kind", "ship", "-ref", "ship/r1/8", "-yes")
	if code != ExitFailed || !strings.Contains(errOut, "has no dead letter") {
		t.Errorf("delete-dead of none: exit %d %q", code, errOut)
	}

	l := openBolt(t, db)
	defer l.Close()
	if err := timerstest.CheckDueIndex(context.Background(), l, []store.Partition{ada, region1}); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteDeadPrintsWhatItDeletes: delete-dead shows the dead letter's
// attempts, last error and value before it deletes it.
func TestDeleteDeadPrintsWhatItDeletes(t *testing.T) {
	db := deadFixture(t)
	code, out, errOut := run(t, t0, "delete-dead", "-db", db, "-partition", region1Text, "-kind", "ship", "-ref", "ship/r1/8", "-due", "2026-03-01T11:15:00.000Z", "-yes")
	if code != ExitOK {
		t.Fatalf("exit %d %s%s", code, out, errOut)
	}
	golden(t, "delete-dead.txt", strings.ReplaceAll(out, db, "FIXTURE"))
	if got := len(deadRows(t, db)); got != 2 {
		t.Errorf("%d dead letters, want 2", got)
	}
}
