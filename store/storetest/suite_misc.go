package storetest

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

var deadlineChecks = []check{
	{"FutureCommits", testDeadlineFuture},
	{"AtDeadlineCommits", testDeadlineAt},
	{"PassedWritesNothing", testDeadlinePassed},
	{"ClockMovesOutcome", testDeadlineClockMoves},
}

var statsChecks = []check{
	{"EmptyPartition", testStatsEmpty},
	{"GrowsWithData", testStatsGrow},
}

var probeChecks = []check{
	{"Answers", testProbeAnswers},
	{"CancelledContextFails", testProbeCancelled},
}

var contextChecks = []check{
	{"EndedContextFailsEveryMethod", testEndedContext},
}

var errorChecks = []check{
	{"NamePartitionNeverValue", testErrorMessages},
}

func deadlineBatch(deadline time.Time) *store.Batch {
	return store.NewBatch().Require(store.Absent(store.Key("k"))).Put(store.Key("k"), store.Value("v")).WithDeadline(deadline)
}

// testDeadlineFuture: a deadline after the store clock's now commits. The
// clock reads 2017 while the wall clock is later: a store that compared
// against the wall clock would fail here.
func testDeadlineFuture(t *testing.T, f *fixture) {
	f.apply(t, f.p, deadlineBatch(f.clk.Now().Add(time.Hour)), store.Committed, "deadline an hour ahead")
	f.wantValue(t, f.p, store.Key("k"), store.Value("v"))
}

// testDeadlineAt: the deadline is the latest time the batch may commit, so
// a clock reading exactly the deadline commits.
func testDeadlineAt(t *testing.T, f *fixture) {
	f.apply(t, f.p, deadlineBatch(f.clk.Now()), store.Committed, "deadline equal to now")
	f.wantValue(t, f.p, store.Key("k"), store.Value("v"))
}

// wantDeadlinePassed applies b and requires DeadlinePassed reporting the
// clock's current reading, with nothing written.
func (f *fixture) wantDeadlinePassed(t testing.TB, b *store.Batch, what string) {
	t.Helper()
	out := f.apply(t, f.p, b, store.DeadlinePassed, what)
	if now := f.clk.Now(); !out.Now.Equal(now) {
		t.Fatalf("%s: outcome Now = %v, want the store clock's %v", what, out.Now, now)
	}
	f.wantRows(t, f.p, nil)
}

// testDeadlinePassed: a deadline before the clock's now reports
// DeadlinePassed with Now set and writes nothing, though the batch's
// preconditions hold.
func testDeadlinePassed(t *testing.T, f *fixture) {
	f.wantDeadlinePassed(t, deadlineBatch(f.clk.Now().Add(-time.Millisecond)), "deadline 1ms ago")
	f.wantDeadlinePassed(t, deadlineBatch(time.UnixMilli(1)), "deadline in 1970")
}

// testDeadlineClockMoves: the same batch flips outcome as the store's
// clock moves past its deadline and back.
func testDeadlineClockMoves(t *testing.T, f *fixture) {
	deadline := f.clk.Now().Add(5 * time.Second)
	f.clk.Set(deadline.Add(time.Millisecond))
	f.wantDeadlinePassed(t, deadlineBatch(deadline), "clock 1ms past the deadline")
	f.clk.Advance(time.Hour)
	f.wantDeadlinePassed(t, deadlineBatch(deadline), "clock an hour past the deadline")
	f.clk.Set(deadline)
	f.apply(t, f.p, deadlineBatch(deadline), store.Committed, "clock set back to the deadline")
	f.wantValue(t, f.p, store.Key("k"), store.Value("v"))
}

func (f *fixture) stats(t testing.TB, p store.Partition) int64 {
	t.Helper()
	st, err := f.s.Stats(f.ctx, p)
	noErr(t, err, "Stats")
	if st.ApproximateBytes < 0 {
		t.Fatalf("Stats of %v: ApproximateBytes %d < 0", p, st.ApproximateBytes)
	}
	return st.ApproximateBytes
}

// testStatsEmpty: Stats of a partition never written is a non-negative
// estimate, and of an empty store too.
func testStatsEmpty(t *testing.T, f *fixture) {
	f.stats(t, f.p)
	f.put(t, f.other, "k", "v")
	f.stats(t, f.p)
}

// testStatsGrow: writing about 1 MiB in large values never makes the
// estimate shrink, and makes it grow. Engines whose estimate lags the
// commit (FoundationDB's byte sample) get a few seconds to catch up.
func testStatsGrow(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	const target = 1 << 20
	valueSize := min(caps.MaxValueBytes, 64<<10, caps.MaxBatchBytes-16)
	if valueSize < 1 {
		t.Skipf("MaxValueBytes %d and MaxBatchBytes %d leave no room for a value", caps.MaxValueBytes, caps.MaxBatchBytes)
	}
	perBatch := max(1, min(opsLimit(caps), caps.MaxBatchBytes/(valueSize+16)))
	value := store.Value(bytes.Repeat([]byte("0123456789abcdef"), valueSize/16+1)[:valueSize])

	empty := f.stats(t, f.p)
	prev, written := empty, 0
	for i := 0; written < target; {
		b := store.NewBatch()
		for range perBatch {
			b.Put(store.Key(fmt.Sprintf("stats/%06d", i)), value)
			i++
		}
		f.apply(t, f.p, b, store.Committed, "large values")
		written += b.Bytes()
		now := f.stats(t, f.p)
		if now < prev {
			t.Fatalf("ApproximateBytes fell from %d to %d after writing %d more bytes", prev, now, b.Bytes())
		}
		prev = now
	}
	for wait := time.Now().Add(5 * time.Second); prev <= empty && time.Now().Before(wait); {
		time.Sleep(50 * time.Millisecond)
		prev = f.stats(t, f.p)
	}
	if prev <= empty {
		t.Fatalf("ApproximateBytes %d after writing %d bytes, %d when empty: want growth", prev, written, empty)
	}
}

// testProbeAnswers: Probe of a working store succeeds.
func testProbeAnswers(t *testing.T, f *fixture) {
	noErr(t, f.s.Probe(f.ctx), "Probe")
}

// testProbeCancelled: Probe bounded by an ended context fails with
// ErrUnavailable.
func testProbeCancelled(t *testing.T, f *fixture) {
	wantSentinel(t, f.s.Probe(cancelledContext(f.ctx)), store.ErrUnavailable, "Probe with a cancelled context")
}

// testEndedContext: every method bounded by a context that has already
// ended (cancelled or past its deadline) fails with ErrUnavailable (Apply:
// or ErrUnknownResult) and writes nothing.
func testEndedContext(t *testing.T, f *fixture) {
	f.put(t, f.p, "k", "v")
	expired, cancel := context.WithDeadline(f.ctx, suiteEpoch)
	defer cancel()
	for name, ctx := range map[string]context.Context{"cancelled": cancelledContext(f.ctx), "expired": expired} {
		_, _, err := f.s.Get(ctx, f.p, store.Key("k"))
		wantSentinel(t, err, store.ErrUnavailable, "Get with a "+name+" context")
		_, err = f.s.GetMany(ctx, f.p, keys("k"))
		wantSentinel(t, err, store.ErrUnavailable, "GetMany with a "+name+" context")
		_, err = f.s.Scan(ctx, f.p, fullStart, fullEnd, nil, 10)
		wantSentinel(t, err, store.ErrUnavailable, "Scan with a "+name+" context")
		_, err = f.s.Stats(ctx, f.p)
		wantSentinel(t, err, store.ErrUnavailable, "Stats with a "+name+" context")
		wantSentinel(t, f.s.Probe(ctx), store.ErrUnavailable, "Probe with a "+name+" context")
		_, err = f.s.Apply(ctx, f.p, store.NewBatch().Put(store.Key("new"), store.Value("n")))
		if !wrapsOneOf(err, store.ErrUnavailable, store.ErrUnknownResult) {
			t.Fatalf("Apply with a %s context: error %v wraps %v, want ErrUnavailable or ErrUnknownResult", name, err, sentinelsOf(err))
		}
	}
	f.wantRows(t, f.p, rows("k", "v"))
}

// testErrorMessages: errors name the partition and never show a stored or
// offered value, raw or in hex.
func testErrorMessages(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	secret := "SECRET-VALUE-"
	name := store.PartitionName(f.p)
	check := func(err error, what string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := err.Error()
		if !strings.Contains(msg, name) {
			t.Errorf("%s: error %q does not name partition %q", what, msg, name)
		}
		if strings.Contains(msg, secret) || strings.Contains(strings.ToLower(msg), hex.EncodeToString([]byte(secret))) {
			t.Errorf("%s: error %q shows a value", what, msg)
		}
	}
	f.put(t, f.p, "k", secret)
	small := store.Value(secret)
	longKey := make(store.Key, caps.MaxKeyBytes+1)
	_, err := f.s.Apply(f.ctx, f.p, store.NewBatch().Require(store.Equals(longKey, small)).Put(store.Key("k"), small))
	check(err, "Apply with a key over MaxKeyBytes")
	_, err = f.s.Apply(f.ctx, f.p, store.NewBatch().Put(store.Key("k"), small).Add(store.Write{Op: 42, Key: store.Key("k"), Value: small}))
	check(err, "Apply with an unknown op")
	if caps.MaxValueBytes < maxBuildBytes {
		big := store.Value(strings.Repeat(secret, caps.MaxValueBytes/len(secret)+1))
		_, err = f.s.Apply(f.ctx, f.p, store.NewBatch().Put(store.Key("k"), big))
		check(err, "Apply with a value over MaxValueBytes")
	}
	_, _, err = f.s.Get(f.ctx, f.p, longKey)
	check(err, "Get of a key over MaxKeyBytes")
	_, err = f.s.Scan(f.ctx, f.p, fullStart, fullEnd, nil, 0)
	check(err, "Scan with limit 0")
	_, err = f.s.Scan(f.ctx, f.p, fullStart, fullEnd, store.Cursor("not a cursor"), 1)
	check(err, "Scan with a malformed cursor")
}
