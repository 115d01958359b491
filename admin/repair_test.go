package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testpath"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

const adaText = `("orders", 2, "ada")`

// relayStore writes rows 1..n, each putting OrderKey(i) = i into region
// 1 or 2 alternately, and corrupts row bad. It returns the file, closed.
func relayStore(t *testing.T, n, bad int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.db")
	l := openBolt(t, path)
	defer l.Close()
	ctx := context.Background()
	obs, err := outbox.Read(ctx, store.ReaderOf(l, ada))
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.NewBuilder(l, t0.Add(-time.Minute), obs)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		target := []store.Partition{region1, region2}[i%2]
		if _, err := ob.Relay(context.Background(), target, []gen.RelayPut{{Key: orderKey(t, uint64(i)), Value: []byte{byte(i)}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := store.NewBatch()
	if err := ob.Finish(b); err != nil {
		t.Fatal(err)
	}
	if out, err := l.Apply(ctx, ada, b); err != nil || !out.Committed() {
		t.Fatal(out, err)
	}
	if out, err := l.Apply(ctx, ada, store.NewBatch().Put(gen.AppendRelayKey(nil, uint64(bad)), append([]byte{gen.VersionRelayV1}, "not a row"...))); err != nil || !out.Committed() {
		t.Fatal(out, err)
	}
	return path
}

// fireRelay opens the file, runs the source's due timers at now through
// the relay, and checks the due index invariant.
func fireRelay(t *testing.T, path string, now time.Time) timers.Report {
	t.Helper()
	l := openBolt(t, path)
	defer l.Close()
	rh, err := relay.NewHandler(relay.HandlerConfig{Target: l})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := timers.NewRegistry(rh)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := timers.RunDue(context.Background(), l, ada, reg, now, timers.RunConfig{Clock: clock.NewManual(now), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := timerstest.CheckDueIndex(context.Background(), l, []store.Partition{ada, region1, region2}); err != nil {
		t.Fatal(err)
	}
	return rep
}

// delivered returns what the targets hold of OrderKey(1..n).
func delivered(t *testing.T, path string, n int) []int {
	t.Helper()
	l := openBolt(t, path)
	defer l.Close()
	var got []int
	for i := 1; i <= n; i++ {
		for _, p := range []store.Partition{region1, region2} {
			if v, ok, err := l.Get(context.Background(), p, orderKey(t, uint64(i))); err != nil {
				t.Fatal(err)
			} else if ok && len(v) == 1 && int(v[0]) == i {
				got = append(got, i)
			}
		}
	}
	return got
}

// relayTimer returns the relay timer's due time and value (ok false: none).
func relayTimer(t *testing.T, path string) (time.Time, []byte, bool) {
	t.Helper()
	l := openBolt(t, path)
	defer l.Close()
	ref, due, err := timers.ReadRef(context.Background(), l, ada, timers.KindRelay, "")
	if err != nil || ref == nil {
		return time.Time{}, nil, false
	}
	k, _ := timers.TimerKey(due, timers.KindRelay, "")
	v, _, err := l.Get(context.Background(), ada, k)
	if err != nil {
		t.Fatal(err)
	}
	return msTime(storedMs(due)), v, true
}

func getRev(t *testing.T, db, key string) string {
	t.Helper()
	code, out, errOut := run(t, t0, "get", "-db", db, "-partition", adaText, "-key", key, "-json")
	if code != ExitOK {
		t.Fatalf("get %s: exit %d %s", key, code, errOut)
	}
	var g struct{ Row Row }
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatal(err)
	}
	return g.Row.Rev
}

// TestQuarantineResumesTheSourceAndRestorePutsItBack: a corrupt relay row
// holds its source; quarantine moves it aside, the relay then delivers
// every row behind it and the targets hold exactly the model's rows;
// restore puts it back byte for byte and the source is held again.
func TestQuarantineResumesTheSourceAndRestorePutsItBack(t *testing.T) {
	const n, bad = 6, 3
	db := relayStore(t, n, bad)
	fireRelay(t, db, t0)
	if got := delivered(t, db, n); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("before the repair the targets hold %v, want [1 2]: the corrupt row 3 holds the rest", got)
	}
	due, v, ok := relayTimer(t, db)
	if !ok || len(v) == 0 || !due.After(t0) {
		t.Fatalf("the relay timer is not held: due %v value %x ok %v", due, v, ok)
	}
	// Held again at each fire.
	fireRelay(t, db, due)
	if got := delivered(t, db, n); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("a held source delivered %v", got)
	}

	rv := getRev(t, db, "(16, 3)")
	now := t0.Add(time.Hour)
	code, out, errOut := run(t, now, "quarantine", "-db", db, "-partition", adaText, "-key", "(16, 3)",
		"-reason", "producer bug #12", "-who", "oncall", "-expect", rv, "-yes")
	if code != ExitOK {
		t.Fatalf("quarantine: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"move RelayKey (16, 3)", "it is corrupt", "the relay timer moves", "done: (16, 3) moved aside"} {
		if !strings.Contains(out, want) {
			t.Errorf("quarantine's output lacks %q:\n%s", want, out)
		}
	}
	due, v, ok = relayTimer(t, db)
	if !ok || len(v) != 0 || !due.Equal(now) {
		t.Fatalf("after quarantine the relay timer is due %v with value %x, want now with no hold", due, v)
	}
	_, out, _ = run(t, now, "quarantined", "-db", db, "-json")
	var q struct{ Quarantined []QuarantinedRow }
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatal(err)
	}
	if len(q.Quarantined) != 1 || q.Quarantined[0].Who != "oncall" || q.Quarantined[0].Reason != "producer bug #12" ||
		q.Quarantined[0].At != stamp(now) || q.Quarantined[0].Row.Key != "(16, 3)" || q.Quarantined[0].Row.Value != "x:016e6f74206120726f77" {
		t.Fatalf("quarantined lists %+v", q.Quarantined)
	}

	fireRelay(t, db, now)
	if got := delivered(t, db, n); fmt.Sprint(got) != "[1 2 4 5 6]" {
		t.Fatalf("after quarantine the targets hold %v, want every row but 3: [1 2 4 5 6]", got)
	}
	_, out, _ = run(t, now, "scan", "-db", db, "-partition", adaText, "-class", "RelayKey", "-json")
	if !strings.Contains(out, `"rows":[]`) {
		t.Fatalf("the source's queue is not empty: %s", out)
	}

	code, out, errOut = run(t, now, "restore", "-db", db, "-partition", adaText, "-key", "(16, 3)", "-yes")
	if code != ExitOK {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	if got := getRev(t, db, "(16, 3)"); got != rv {
		t.Fatalf("the restored row's revision is %s, want %s", got, rv)
	}
	_, out, _ = run(t, now, "quarantined", "-db", db, "-json")
	if !strings.Contains(out, `"quarantined":[]`) {
		t.Fatalf("the quarantine range is not empty after restore: %s", out)
	}
	if due, _, ok := relayTimer(t, db); !ok || !due.Equal(now) {
		t.Fatalf("restore did not re-arm the relay timer: %v %v", due, ok)
	}
	fireRelay(t, db, now)
	if due, v, ok := relayTimer(t, db); !ok || len(v) == 0 || !due.After(now) {
		t.Fatalf("the restored corrupt row does not hold the source: %v %x %v", due, v, ok)
	}
}

// TestQuarantineRefusesARowThatChanged: a row rewritten between the read
// and the batch, or whose revision is not -expect's, is refused and
// nothing is written.
func TestQuarantineRefusesARowThatChanged(t *testing.T) {
	db := relayStore(t, 4, 2)
	before := snapshot(t, db)
	code, _, errOut := run(t, t0, "quarantine", "-db", db, "-partition", adaText, "-key", "(16, 2)",
		"-reason", "r", "-expect", "0000000000000000", "-yes")
	if code != ExitFailed || !strings.Contains(errOut, "changed since it was shown") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("-expect of another revision: exit %d %q", code, errOut)
	}
	if snapshot(t, db) != before {
		t.Fatal("a refused quarantine wrote")
	}

	// The service rewrites the row between the command's read and its
	// batch (through the command's own handle: bbolt lets no second one
	// open meanwhile).
	var stdout, stderr bytes.Buffer
	hooked := NewCommand(Config{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Clock: clock.NewManual(t0)})
	hooked.onOpen = func(st *opened) {
		hooked.beforeApply = func() {
			if _, err := st.layer.Apply(context.Background(), ada, store.NewBatch().Put(gen.AppendRelayKey(nil, 2), []byte("rewritten"))); err != nil {
				t.Error(err)
			}
		}
	}
	code = hooked.Run(context.Background(), []string{"quarantine", "-db", db, "-partition", adaText, "-key", "(16, 2)", "-reason", "r", "-yes"})
	if code != ExitFailed || !strings.Contains(stderr.String(), "RelayKey (16, 2) changed since it was read; nothing written") {
		t.Fatalf("a row changed in between: exit %d %q", code, stderr.String())
	}
	if got := getRev(t, db, "(16, 2)"); got != rev([]byte("rewritten")) {
		t.Fatalf("the row is %s, want the rewrite's", got)
	}
	_, out, _ := run(t, t0, "quarantined", "-db", db, "-json")
	if !strings.Contains(out, `"quarantined":[]`) {
		t.Fatalf("a refused quarantine left a record: %s", out)
	}
}

// TestQuarantineOfAPendingOutcomeKeepsTheBacklogExact: the backlog drops
// by the row and its record's bytes, and the delivery timer goes with the
// last row; restore puts back exactly what was there.
func TestQuarantineOfAPendingOutcomeKeepsTheBacklogExact(t *testing.T) {
	db := fixture(t)
	key := `(18, 4, "ord_ada_9")`
	row := func(k string) string {
		_, out, _ := run(t, t0, "get", "-db", db, "-partition", adaText, "-key", k)
		return out
	}
	backlog, timerRef, pending := row("(3)"), row(`(7, 8, "")`), row(key)
	if !strings.Contains(backlog, "Backlog{Rows: 1, Bytes: 12}") {
		t.Fatalf("the fixture's backlog: %s", backlog)
	}
	code, out, errOut := run(t, t0, "quarantine", "-db", db, "-partition", adaText, "-key", key, "-reason", "sink rejects it", "-yes")
	if code != ExitOK {
		t.Fatalf("quarantine: exit %d %s%s", code, out, errOut)
	}
	for _, k := range []string{"(3)", `(7, 8, "")`, "(17, 1772366430000, 8, \"\")", key} {
		if code, _, _ := run(t, t0, "get", "-db", db, "-partition", adaText, "-key", k); code != ExitFailed {
			t.Errorf("%s is still there after the last pending row was quarantined", k)
		}
	}
	if code, out, errOut := run(t, t0, "restore", "-db", db, "-partition", adaText, "-key", key, "-yes"); code != ExitOK {
		t.Fatalf("restore: exit %d %s%s", code, out, errOut)
	}
	if got := row("(3)"); got != backlog {
		t.Errorf("the backlog after restore:\n%s\nwant\n%s", got, backlog)
	}
	if got := row(key); got != pending {
		t.Errorf("the pending row after restore:\n%s\nwant\n%s", got, pending)
	}
	if got := row(`(7, 8, "")`); !strings.Contains(got, "TimerRefKey") || got == timerRef {
		// Re-armed now, not at its old backoff time.
		t.Errorf("the delivery timer after restore:\n%s\n(before: %s)", got, timerRef)
	}
	l := openBolt(t, db)
	defer l.Close()
	if err := timerstest.CheckDueIndex(context.Background(), l, []store.Partition{ada}); err != nil {
		t.Fatal(err)
	}
}

// TestQuarantineOfATimerMovesItsReferenceEntry: a service's timer moves
// aside with its reference entry, named by either key, the due index
// invariant holding; restore puts both back and wakes the partition; the
// relay and delivery timers are refused.
func TestQuarantineOfATimerMovesItsReferenceEntry(t *testing.T) {
	db := fixture(t)
	check := func() {
		t.Helper()
		l := openBolt(t, db)
		defer l.Close()
		if err := timerstest.CheckDueIndex(context.Background(), l, []store.Partition{ada}); err != nil {
			t.Fatal(err)
		}
	}
	ref := `(7, 1000, "ship/ada/1")`
	row := `(17, 1772366340000, 1000, "ship/ada/1")`
	code, out, errOut := run(t, t0, "quarantine", "-db", db, "-partition", adaText, "-key", ref, "-reason", "poison", "-yes")
	if code != ExitOK || !strings.Contains(out, "the two move together") {
		t.Fatalf("quarantine by the reference entry: exit %d %s%s", code, out, errOut)
	}
	for _, k := range []string{ref, row} {
		if code, _, _ := run(t, t0, "get", "-db", db, "-partition", adaText, "-key", k); code != ExitFailed {
			t.Errorf("%s is still there", k)
		}
	}
	check()
	if code, out, errOut := run(t, t0, "restore", "-db", db, "-partition", adaText, "-key", row, "-yes"); code != ExitOK {
		t.Fatalf("restore: exit %d %s%s", code, out, errOut)
	}
	check()
	if code, _, errOut := run(t, t0, "get", "-db", db, "-partition", adaText, "-key", ref); code != ExitOK {
		t.Errorf("the reference entry is not back: %s", errOut)
	}
	code, _, errOut = run(t, t0, "quarantine", "-db", db, "-partition", adaText, "-key", `(7, 7, "")`, "-reason", "r", "-yes")
	if code != ExitUsage || !strings.Contains(errOut, "the relay timer drains its queue") {
		t.Errorf("quarantine of the relay timer: exit %d %q", code, errOut)
	}
}

// TestUnblockAndRedrive: unblock removes the target from the scan state
// and re-drives the relay; redrive moves a waiting timer to now and says
// a timer of a kind without a handler is held again.
func TestUnblockAndRedrive(t *testing.T) {
	db := fixture(t)
	code, out, errOut := run(t, t0, "unblock", "-db", db, "-partition", adaText, "-target", idText(region2), "-yes")
	if code != ExitOK {
		t.Fatalf("unblock: exit %d %s%s", code, out, errOut)
	}
	_, out, _ = run(t, t0, "get", "-db", db, "-partition", adaText, "-key", "(2)")
	if !strings.Contains(out, "RelayScanV1{CycleEnd: 3, Cursor: 1, Blocked: []}") {
		t.Errorf("the scan state after unblock:\n%s", out)
	}
	if due, v, ok := relayTimer(t, db); !ok || !due.Equal(t0) || len(v) == 0 {
		t.Errorf("unblock left the relay timer at %v (value %x), want now with its value", due, v)
	}
	code, _, errOut = run(t, t0, "unblock", "-db", db, "-partition", adaText, "-target", idText(region2), "-yes")
	if code != ExitFailed || !strings.Contains(errOut, "is not blocked") {
		t.Errorf("unblock again: exit %d %q", code, errOut)
	}

	code, out, errOut = run(t, t0, "redrive", "-db", db, "-partition", adaText, "-kind", "ship", "-ref", "ship/ada/2", "-yes")
	if code != ExitOK || !strings.Contains(out, "holds it again 30s later") {
		t.Fatalf("redrive: exit %d %s%s", code, out, errOut)
	}
	_, out, _ = run(t, t0, "timers", "-db", db, "-partition", adaText, "-due", "-json")
	if !strings.Contains(out, `"reference":"ship/ada/2"`) {
		t.Errorf("the redriven timer is not due now: %s", out)
	}
	l := openBolt(t, db)
	defer l.Close()
	if err := timerstest.CheckDueIndex(context.Background(), l, []store.Partition{ada}); err != nil {
		t.Fatal(err)
	}
}

// snapshot is the file's bytes, to tell that nothing was written.
func snapshot(t *testing.T, path string) testpath.State { return testpath.Snapshot(t, path) }

// TestConfirmationAtATerminal: without -yes, a repair asks at a terminal
// and writes only on "yes".
func TestConfirmationAtATerminal(t *testing.T) {
	db := fixture(t)
	args := []string{"redrive", "-db", db, "-partition", adaText, "-kind", "1000", "-ref", "ship/ada/2"}
	for _, answer := range []string{"no\n", "", "yes\n"} {
		var stdout, stderr bytes.Buffer
		c := NewCommand(Config{Stdin: strings.NewReader(answer), Stdout: &stdout, Stderr: &stderr, Clock: clock.NewManual(t0)})
		c.forceTerminal = true
		before := snapshot(t, db)
		code := c.Run(context.Background(), args)
		if !strings.Contains(stdout.String(), "type yes to write this: ") {
			t.Errorf("answer %q: no question asked:\n%s", answer, stdout.String())
		}
		if answer == "yes\n" {
			if code != ExitOK || !strings.Contains(stdout.String(), "done: ") {
				t.Errorf("answer yes: exit %d %s%s", code, stdout.String(), stderr.String())
			}
			continue
		}
		if code != ExitFailed || !strings.Contains(stderr.String(), "not confirmed; nothing written") || snapshot(t, db) != before {
			t.Errorf("answer %q: exit %d %q, or it wrote", answer, code, stderr.String())
		}
	}
}
