package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// A mutant is the reference model broken on purpose, one realistic bug at
// a time. The suite proves it can fail by failing the named subtest
// against each (TestSuiteCatchesMutants).
type mutant struct {
	name  string
	fails string // subtest under Run, "Group/Check"
	caps  store.Capabilities
	wrap  func(m *model) store.Store
}

var mutants = []mutant{
	{"writes-on-failed-guard", "Apply/PreconditionFailedWritesNothing", fdbLikeCaps, func(m *model) store.Store { return writesOnFailedGuard{m} }},
	{"first-write-wins", "Apply/LastWriteWins", fdbLikeCaps, func(m *model) store.Store { return firstWriteWins{m} }},
	{"names-last-failed-guard", "Apply/FirstFailedPreconditionNamed", fdbLikeCaps, func(m *model) store.Store { return namesLastFailure{m} }},
	{"ignores-deadline", "Deadline/PassedWritesNothing", fdbLikeCaps, func(m *model) store.Store { return ignoresDeadline{m} }},
	{"deadline-on-wall-clock", "Deadline/FutureCommits", fdbLikeCaps, func(m *model) store.Store { return wallClockDeadline{m} }},
	{"writes-then-checks-context", "Apply/CancelledBeforeStartWritesNothing", fdbLikeCaps, func(m *model) store.Store { return writesThenChecksContext{m} }},
	{"cancel-error-after-commit", "Apply/CancelRacingCommit", fdbLikeCaps, func(m *model) store.Store { return cancelErrorAfterCommit{m} }},
	{"retains-batch-slices", "Apply/DoesNotRetainOrModifyBatch", fdbLikeCaps, func(m *model) store.Store { return &retainsBatch{Store: m} }},
	{"check-then-write", "Concurrency/GuardedIncrements", fdbLikeCaps, func(m *model) store.Store { return checkThenWrite{m} }},
	{"torn-get-many", "Concurrency/GetManyReadsOneSnapshot", fdbLikeCaps, func(m *model) store.Store { return tornGetMany{m} }},
	{"shares-returned-slices", "Read/ResultsAreCallersCopies", fdbLikeCaps, func(m *model) store.Store { return &sharesReads{Store: m} }},
	{"empty-value-absent", "Read/AbsentPresentEmpty", fdbLikeCaps, func(m *model) store.Store { return emptyIsAbsent{m} }},
	{"restarts-on-bad-cursor", "Cursor/MalformedInvalid", fdbLikeCaps, func(m *model) store.Store { return restartsOnBadCursor{m} }},
	{"cursor-unbound-range", "Cursor/ForeignRangeInvalid", fdbLikeCaps, func(m *model) store.Store { return unboundCursor{m} }},
	{"cursor-unbound-partition", "Cursor/ForeignPartitionInvalid", fdbLikeCaps, func(m *model) store.Store { return unboundCursor{m} }},
	{"repeats-cursor-row", "Scan/EveryRowOnceInOrder", fdbLikeCaps, func(m *model) store.Store { return repeatsCursorRow{m} }},
	{"end-inclusive", "Scan/BoundsHalfOpen", fdbLikeCaps, func(m *model) store.Store { return endInclusive{m} }},
	{"next-on-empty-page", "Scan/NextNilExactlyWhenExhausted", fdbLikeCaps, func(m *model) store.Store { return nextOnEmptyPage{m} }},
	{"next-nil-one-row-early", "Scan/NextNilExactlyWhenExhausted", fdbLikeCaps, func(m *model) store.Store { return earlyNilNext{m} }},
	{"append-scan-drops-rows", "Scan/AppendScanAppendsWhatScanReads", fdbLikeCaps, func(m *model) store.Store { return appendScanDropsRows{m} }},
	{"append-scan-shares-bytes", "Scan/AppendScanAppendsWhatScanReads", fdbLikeCaps, func(m *model) store.Store { return appendScanSharesBytes{m} }},
	{"one-partition", "Partition/SameKeyTwoValues", fdbLikeCaps, func(m *model) store.Store { return onePartition{m} }},
	{"writes-unencodable-partition", "Partition/UnencodableIsInvalid", fdbLikeCaps, func(m *model) store.Store { return fallbackPartition{m} }},
	{"key-limit-exclusive", "Limits/KeyAtLimit", fdbLikeCaps, func(m *model) store.Store { return keyLimitExclusive{m} }},
	{"batch-bytes-off-by-one", "Limits/BatchBytesAtLimit", smallCaps, func(m *model) store.Store { return reportsCaps{m, m.caps, -1} }},
	{"reservation-enforced", "Limits/OpsAtLimit", smallCaps, func(m *model) store.Store { return reservationEnforced{m} }},
	{"empty-batch-commits", "Limits/EmptyBatchInvalid", fdbLikeCaps, func(m *model) store.Store { return emptyBatchCommits{m} }},
	{"stats-constant", "Stats/GrowsWithData", smallCaps, func(m *model) store.Store { return constantStats{m} }},
	{"probe-ignores-context", "Probe/CancelledContextFails", fdbLikeCaps, func(m *model) store.Store { return probeIgnoresContext{m} }},
	{"get-ignores-context", "Context/EndedContextFailsEveryMethod", fdbLikeCaps, func(m *model) store.Store { return getIgnoresContext{m} }},
	{"value-in-error", "Errors/NamePartitionNeverValue", fdbLikeCaps, func(m *model) store.Store { return valueInError{m} }},
}

const mutantEnv = "STORETEST_MUTANT"

// TestMutantSuite runs the suite against the mutant named by
// $STORETEST_MUTANT ("none": the plain model). It runs only as a
// subprocess of TestSuiteCatchesMutants.
func TestMutantSuite(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("runs only as a subprocess of TestSuiteCatchesMutants")
	}
	if name == "none" {
		Run(t, openModel(fdbLikeCaps))
		return
	}
	for _, mu := range slices.Concat(mutants, dueMutants, transactMutants, prefetchMutants, commitMutants) {
		if mu.name == name {
			Run(t, func(t *testing.T, clk clock.Clock) store.Store { return mu.wrap(newModel(clk, mu.caps)) })
			return
		}
	}
	t.Fatalf("no mutant %q", name)
}

// runMutant runs the one subtest path of TestMutantSuite against mutant.
func runMutant(t *testing.T, mutant, path string) string {
	group, check, _ := strings.Cut(path, "/")
	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run=^TestMutantSuite$/^"+group+"$/^"+check+"$", "-test.count=1", "-test.v", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), mutantEnv+"="+mutant)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running mutant %s: %v", mutant, err)
	}
	if strings.Contains(string(out), "panic:") {
		t.Fatalf("mutant %s panicked instead of failing an assertion:\n%s", mutant, out)
	}
	return string(out)
}

// TestSuiteCatchesMutants proves the suite's subtests can fail: each
// mutant makes its named subtest fail, while the plain model passes it.
func TestSuiteCatchesMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns one test process per mutant")
	}
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		out := runMutant(t, "none", "Apply/LastWriteWins")
		if !strings.Contains(out, "--- PASS: TestMutantSuite/Apply/LastWriteWins (") {
			t.Fatalf("the plain model did not pass Apply/LastWriteWins in a subprocess:\n%s", out)
		}
	})
	for _, mu := range slices.Concat(mutants, dueMutants, transactMutants, prefetchMutants, commitMutants) {
		t.Run(mu.name, func(t *testing.T) {
			t.Parallel()
			out := runMutant(t, mu.name, mu.fails)
			if !strings.Contains(out, "--- FAIL: TestMutantSuite/"+mu.fails+" (") {
				t.Fatalf("mutant %s survived %s:\n%s", mu.name, mu.fails, out)
			}
		})
	}
}

// appendScanDropsRows appends a page over the rows passed in, not after
// them.
type appendScanDropsRows struct{ store.Store }

func (s appendScanDropsRows) AppendScan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int, rows []store.KeyValue, buf []byte) (store.ScanPage, []byte, error) {
	page, err := s.Store.Scan(ctx, p, start, end, after, limit)
	if err != nil {
		return store.ScanPage{}, buf, err
	}
	page.Entries, buf = appendRows(rows[:0], buf, page.Entries)
	return page, buf, nil
}

// appendScanSharesBytes hands out its own page's bytes, leaving buf
// alone: rows alias store memory, not the caller's buffer.
type appendScanSharesBytes struct{ store.Store }

func (s appendScanSharesBytes) AppendScan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int, rows []store.KeyValue, buf []byte) (store.ScanPage, []byte, error) {
	page, err := s.Store.Scan(ctx, p, start, end, after, limit)
	if err != nil {
		return store.ScanPage{}, buf, err
	}
	page.Entries = append(rows, page.Entries...)
	return page, buf, nil
}

type writesOnFailedGuard struct{ store.Store }

func (s writesOnFailedGuard) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	out, err := s.Store.Apply(ctx, p, b)
	if err == nil && out.Outcome == store.PreconditionFailed {
		_, err = s.Store.Apply(ctx, p, &store.Batch{Writes: b.Writes})
	}
	return out, err
}

type firstWriteWins struct{ store.Store }

func (s firstWriteWins) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	nb := &store.Batch{Preconditions: b.Preconditions, Deadline: b.Deadline}
	seen := map[string]bool{}
	for _, w := range b.Writes {
		if !seen[string(w.Key)] {
			seen[string(w.Key)] = true
			nb.Add(w)
		}
	}
	return s.Store.Apply(ctx, p, nb)
}

type namesLastFailure struct{ store.Store }

func (s namesLastFailure) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	out, err := s.Store.Apply(ctx, p, b)
	if err != nil || out.Outcome != store.PreconditionFailed {
		return out, err
	}
	for i, c := range b.Preconditions {
		v, _, err := s.Get(ctx, p, c.Key)
		if err != nil {
			return out, err
		}
		if !c.Holds(v) {
			out.Failed, out.FailedIndex = c, i
		}
	}
	return out, nil
}

type ignoresDeadline struct{ store.Store }

func (s ignoresDeadline) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	nb := b.Clone()
	nb.Deadline = time.Time{}
	return s.Store.Apply(ctx, p, nb)
}

type wallClockDeadline struct{ store.Store }

func (s wallClockDeadline) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if now := time.Now(); !b.Deadline.IsZero() && now.After(b.Deadline) {
		return store.BatchOutcome{Outcome: store.DeadlinePassed, Now: now}, nil
	}
	return s.Store.Apply(ctx, p, b)
}

type writesThenChecksContext struct{ store.Store }

func (s writesThenChecksContext) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	out, err := s.Store.Apply(context.WithoutCancel(ctx), p, b)
	if err == nil && ctx.Err() != nil {
		return store.BatchOutcome{}, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	}
	return out, err
}

// cancelErrorAfterCommit commits, lingers, and reports a cancellation that
// arrived after the commit as a plain failure.
type cancelErrorAfterCommit struct{ store.Store }

func (s cancelErrorAfterCommit) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if err := ctx.Err(); err != nil {
		return store.BatchOutcome{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	out, err := s.Store.Apply(context.WithoutCancel(ctx), p, b)
	time.Sleep(300 * time.Microsecond)
	if err == nil && ctx.Err() != nil {
		return store.BatchOutcome{}, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	}
	return out, err
}

// retainsBatch serves reads from the caller's batch slices it kept.
type retainsBatch struct {
	store.Store
	mu   sync.Mutex
	kept map[string]store.Value
}

func (s *retainsBatch) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	out, err := s.Store.Apply(ctx, p, b)
	if err == nil && out.Committed() {
		s.mu.Lock()
		if s.kept == nil {
			s.kept = map[string]store.Value{}
		}
		for _, w := range b.Writes {
			s.kept[string(w.Key)] = w.Value
		}
		s.mu.Unlock()
	}
	return out, err
}

func (s *retainsBatch) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	page, err := s.Store.Scan(ctx, p, start, end, after, limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range page.Entries {
		if v, ok := s.kept[string(e.Key)]; ok {
			page.Entries[i].Value = v
		}
	}
	return page, err
}

// checkThenWrite evaluates guards, then writes in a second step.
type checkThenWrite struct{ store.Store }

func (s checkThenWrite) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	for i, c := range b.Preconditions {
		v, _, err := s.Get(ctx, p, c.Key)
		if err != nil {
			return store.BatchOutcome{}, err
		}
		if !c.Holds(v) {
			return store.BatchOutcome{Outcome: store.PreconditionFailed, Failed: c, FailedIndex: i}, nil
		}
	}
	time.Sleep(time.Millisecond) // wide enough that racing calls overlap even on a loaded machine
	return s.Store.Apply(ctx, p, &store.Batch{Writes: b.Writes, Deadline: b.Deadline})
}

type tornGetMany struct{ store.Store }

func (s tornGetMany) GetMany(ctx context.Context, p store.Partition, keys []store.Key) ([]store.Value, error) {
	out := make([]store.Value, len(keys))
	for i, k := range keys {
		v, _, err := s.Get(ctx, p, k)
		if err != nil {
			return nil, err
		}
		out[i] = v
		time.Sleep(time.Millisecond) // wide enough that racing calls overlap even on a loaded machine
	}
	return out, nil
}

// sharesReads hands every Get of a key the same slice.
type sharesReads struct {
	store.Store
	mu    sync.Mutex
	cache map[string]store.Value
}

func (s *sharesReads) Get(ctx context.Context, p store.Partition, key store.Key) (store.Value, bool, error) {
	id, _ := partitionID(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.cache[id+"/"+string(key)]; ok {
		return v, true, nil
	}
	v, ok, err := s.Store.Get(ctx, p, key)
	if ok {
		if s.cache == nil {
			s.cache = map[string]store.Value{}
		}
		s.cache[id+"/"+string(key)] = v
	}
	return v, ok, err
}

type emptyIsAbsent struct{ store.Store }

func (s emptyIsAbsent) Get(ctx context.Context, p store.Partition, key store.Key) (store.Value, bool, error) {
	v, ok, err := s.Store.Get(ctx, p, key)
	if ok && len(v) == 0 {
		return nil, false, err
	}
	return v, ok, err
}

type restartsOnBadCursor struct{ store.Store }

func (s restartsOnBadCursor) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	page, err := s.Store.Scan(ctx, p, start, end, after, limit)
	if errors.Is(err, store.ErrInvalid) && after != nil {
		return s.Store.Scan(ctx, p, start, end, nil, limit)
	}
	return page, err
}

// unboundCursor accepts any well-formed cursor for any partition and range.
type unboundCursor struct{ store.Store }

func (s unboundCursor) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	if c, err := decodeModelCursor(after); err == nil {
		if id, err := partitionID(p); err == nil {
			c.part, c.start, c.end = id, start, end
			after = encodeModelCursor(c)
		}
	}
	return s.Store.Scan(ctx, p, start, end, after, limit)
}

// repeatsCursorRow resumes at the cursor's row instead of after it.
type repeatsCursorRow struct{ store.Store }

func (s repeatsCursorRow) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	page, err := s.Store.Scan(ctx, p, start, end, after, limit)
	c, cerr := decodeModelCursor(after)
	if err != nil || cerr != nil {
		return page, err
	}
	if v, ok, err := s.Get(ctx, p, c.last); err == nil && ok {
		page.Entries = append([]store.KeyValue{{Key: c.last, Value: v}}, page.Entries...)
	}
	return page, nil
}

type endInclusive struct{ store.Store }

func (s endInclusive) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	return s.Store.Scan(ctx, p, start, append(bytes.Clone(end), 0x00), after, limit)
}

// nextOnEmptyPage always hands out a cursor for a non-empty page and
// echoes the caller's cursor on an empty one.
type nextOnEmptyPage struct{ store.Store }

func (s nextOnEmptyPage) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	page, err := s.Store.Scan(ctx, p, start, end, after, limit)
	if err != nil || page.Next != nil {
		return page, err
	}
	if n := len(page.Entries); n > 0 {
		id, _ := partitionID(p)
		page.Next = encodeModelCursor(modelCursor{part: id, start: start, end: end, last: page.Entries[n-1].Key})
	} else {
		page.Next = after
	}
	return page, nil
}

// earlyNilNext drops Next when exactly one row remains.
type earlyNilNext struct{ store.Store }

func (s earlyNilNext) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	page, err := s.Store.Scan(ctx, p, start, end, after, limit)
	if err != nil || page.Next == nil {
		return page, err
	}
	if rest, err := s.Store.Scan(ctx, p, start, end, page.Next, 2); err == nil && len(rest.Entries) == 1 {
		page.Next = nil
	}
	return page, nil
}

// onePartition maps every readable or writable call to one partition.
type onePartition struct{ store.Store }

var shared = Partition{Name: "shared"}

func (s onePartition) Get(ctx context.Context, _ store.Partition, key store.Key) (store.Value, bool, error) {
	return s.Store.Get(ctx, shared, key)
}

func (s onePartition) Apply(ctx context.Context, _ store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	return s.Store.Apply(ctx, shared, b)
}

// fallbackPartition writes batches for unencodable partitions elsewhere.
type fallbackPartition struct{ store.Store }

func (s fallbackPartition) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if _, err := partitionID(p); err != nil {
		p = Partition{Name: "x"}
	}
	return s.Store.Apply(ctx, p, b)
}

type keyLimitExclusive struct{ store.Store }

func (s keyLimitExclusive) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	for _, w := range b.Writes {
		if len(w.Key) >= s.Capabilities().MaxKeyBytes {
			return store.BatchOutcome{}, fmt.Errorf("%w: key too long", store.ErrInvalid)
		}
	}
	return s.Store.Apply(ctx, p, b)
}

// reportsCaps reports caps (MaxBatchBytes adjusted by bytesDelta) other
// than those the inner store enforces.
type reportsCaps struct {
	store.Store
	caps       store.Capabilities
	bytesDelta int
}

func (s reportsCaps) Capabilities() store.Capabilities {
	c := s.caps
	c.MaxBatchBytes += s.bytesDelta
	return c
}

// reservationEnforced applies the builders' limit (MaxBatchOps minus the
// reservation) where Apply must allow MaxBatchOps.
type reservationEnforced struct{ store.Store }

func (s reservationEnforced) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if err := b.Validate(s.Capabilities()); err != nil {
		return store.BatchOutcome{}, err
	}
	return s.Store.Apply(ctx, p, b)
}

type emptyBatchCommits struct{ store.Store }

func (s emptyBatchCommits) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if b == nil || b.Ops() == 0 {
		return store.BatchOutcome{Outcome: store.Committed}, nil
	}
	return s.Store.Apply(ctx, p, b)
}

type constantStats struct{ store.Store }

func (s constantStats) Stats(ctx context.Context, p store.Partition) (store.PartitionStats, error) {
	_, err := s.Store.Stats(ctx, p)
	return store.PartitionStats{}, err
}

type probeIgnoresContext struct{ store.Store }

func (probeIgnoresContext) Probe(context.Context) error { return nil }

type getIgnoresContext struct{ store.Store }

func (s getIgnoresContext) Get(ctx context.Context, p store.Partition, key store.Key) (store.Value, bool, error) {
	return s.Store.Get(context.WithoutCancel(ctx), p, key)
}

type valueInError struct{ store.Store }

func (s valueInError) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	out, err := s.Store.Apply(ctx, p, b)
	if err != nil && b != nil && len(b.Writes) > 0 {
		err = fmt.Errorf("%w (first value %q)", err, b.Writes[0].Value)
	}
	return out, err
}
