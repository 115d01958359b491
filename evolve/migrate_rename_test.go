package evolve_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/internal/testkit/ledger/ledgergen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// oldBook is book bk as the ledger's partitions were named before schemas
// had namespaces: (variant tag, fields...).
func oldBook(bk uint32) store.Identity { return mustIdentity(tuple.Tuple{int64(1), int64(bk)}) }

// oldEntryKey is an entry's key as the ledger's schema numbered its class
// before tags below 100 were the library's.
func oldEntryKey(n uint64) store.Key { return tuple.AppendUint(tuple.AppendUint(nil, 5), n) }

// seedOldLedger writes a store as the ledger wrote it before namespaces:
// books under their old identities, entries (V1) under their old tag, a
// timer each (its wake time and due index entry), and beside them a
// partition of a variant the ledger does not know, a partition of another
// namespace and the library's own rows.
func seedOldLedger(t *testing.T, l *fdblayer.Layer) {
	t.Helper()
	for bk := uint32(1); bk <= books; bk++ {
		b := store.NewBatch()
		for n := uint64(0); n < 12; n++ {
			b.Put(oldEntryKey(n), v1(n))
		}
		require.NoError(t, timers.Schedule(b, l.Capabilities(), nil, timers.Timer{Kind: 1000, Reference: fmt.Sprint("close/", bk), DueAt: t0.Add(time.Duration(bk) * time.Minute)}))
		mustApply(t, l, oldBook(bk), b)
	}
	mustApply(t, l, mustIdentity(tuple.Tuple{int64(7), "x"}), store.NewBatch().Put(oldEntryKey(1), v1(1)))
	mustApply(t, l, elsewhere, store.NewBatch().Put(entryKey(1), v1(1)))
}

// The CHANGELOG's procedure for a store written before namespaces and with
// tags below 100, on every engine (the MVCC engine and bbolt made
// Distributed: 16 due buckets): partitions move to their namespaced
// identities with their timers (a runner killed between a page and its
// checkpoint resumes), then entries move to their class's tag, then
// upgrade. Every row ends where the schema of today reads it, every timer
// keeps a due index entry, nothing else moves, and the partition the
// ledger does not know is counted as left.
func TestRenameThenRetagAStoreOfBeforeNamespaces(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			l, err := fdblayer.Open(fdbsim.AsDistributed(e.open(t)), fdblayer.Config{Logger: quiet})
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			seedOldLedger(t, l)
			before := oldBooks(t, l)
			clk := clock.NewManual(t0)

			rename, err := evolve.IntoNamespace(ledgergen.SchemaNamespace)
			require.NoError(t, err)
			m, err := evolve.RenamePartitionsMigration(l, evolve.RenameConfig{Name: "ledger.namespace", Rename: rename, PageRows: 5, Logger: quiet})
			require.NoError(t, err)
			f := storetest.NewFaults(l)
			var writes atomic.Int32
			f.FailWhen(storetest.MethodApply, func(c storetest.Call) bool {
				return c.Partition == evolve.Partition && writes.Add(1) >= 4 // the claim, two checkpoints, then none: killed
			}, nil)
			_, err = newRunner(t, f, "first", clk).Run(t.Context(), m)
			require.ErrorIs(t, err, storetest.ErrInjected)
			f.Clear()
			rep, err := newRunner(t, f, "first", clk).Run(t.Context(), m)
			require.NoError(t, err)
			cp := rep.Checkpoint
			// 12 entries, a timer row and its reference entry a book; the
			// rows of the page whose checkpoint was lost are not counted:
			// its run again found them moved.
			assert.Equal(t, uint64(books*14-4), cp.Rows)
			assert.Equal(t, uint64(books), cp.Partitions)
			assert.Equal(t, uint64(1), cp.Left, "the partition of a variant the ledger does not know")

			checkRenamed(t, l, before)

			// Then the tags, then the versions.
			start, end := evolve.TagRange(5)
			retag, err := evolve.KeyClassMigration(l, l, evolve.KeyClassConfig{Name: "ledger.tag-100", Namespace: ledgergen.SchemaNamespace,
				Start: start, End: end, Rewrite: evolve.Retag(5, uint64(ledgergen.TagEntryKey)), Logger: quiet})
			require.NoError(t, err)
			rep, err = newRunner(t, l, "first", clk).Run(t.Context(), retag)
			require.NoError(t, err)
			assert.Equal(t, uint64(books*12), rep.Checkpoint.Rewritten)
			require.Equal(t, uint32(2), store.FormatOf(l, ledgergen.SchemaNamespace))
			rep, err = newRunner(t, l, "first", clk).Run(t.Context(), entryMigration(t, l, l, 0))
			require.NoError(t, err)
			assert.Equal(t, uint64(books*12), rep.Checkpoint.Rewritten)
			cs, ce := ledgergen.ClassRange(ledgergen.TagEntryKey)
			for bk := uint32(1); bk <= books; bk++ {
				got := rows(t, l, book(bk), cs, ce)
				require.Len(t, got, 12)
				for n := uint64(0); n < 12; n++ {
					require.Equal(t, string(v2(n, "")), got[string(entryKey(n))])
				}
				require.Empty(t, rows(t, l, book(bk), start, end))
			}

			// The checkpoints are the library's own rows, untouched by
			// any of it.
			cps, err := evolve.Migrations(t.Context(), l)
			require.NoError(t, err)
			require.Len(t, cps, 3)
		})
	}
}

// oldBooks reads the rows of every book under its old identity.
func oldBooks(t *testing.T, l *fdblayer.Layer) map[uint32]map[string]string {
	t.Helper()
	before := map[uint32]map[string]string{}
	for bk := uint32(1); bk <= books; bk++ {
		before[bk] = rows(t, l, oldBook(bk), nil, nil)
		require.Len(t, before[bk], 14, "12 entries, a timer row and its reference entry")
	}
	return before
}

// checkRenamed checks a store seeded by seedOldLedger after its books
// moved into the ledger's namespace: each book holds under its new
// identity exactly the rows it held under the old one (before, from
// oldBooks), and nothing is left under the old; its wake time and due
// index entry moved with it; the partition of a variant the ledger does
// not know and the other namespace's are untouched.
func checkRenamed(t *testing.T, l *fdblayer.Layer, before map[uint32]map[string]string) {
	t.Helper()
	var newBooks []store.Partition
	for bk := uint32(1); bk <= books; bk++ {
		require.Empty(t, rows(t, l, oldBook(bk), nil, nil))
		require.Equal(t, before[bk], rows(t, l, book(bk), nil, nil), "book %d: the rows it had, byte for byte", bk)
		_, ok, err := l.NextWake(t.Context(), oldBook(bk))
		require.NoError(t, err)
		require.False(t, ok)
		at, ok, err := l.NextWake(t.Context(), book(bk))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, t0.Add(time.Duration(bk)*time.Minute), at.UTC())
		newBooks = append(newBooks, book(bk))
	}
	require.NoError(t, timerstest.CheckDueIndex(t.Context(), l, newBooks))
	es, err := l.ScanDue(t.Context(), store.DueQuery{Until: store.MaxTime, Limit: 100})
	require.NoError(t, err)
	require.Len(t, es, books)
	for _, e := range es {
		_, err := ledgergen.ParsePartition(e.Partition)
		require.NoError(t, err, "every due entry names a namespaced book")
	}
	require.Equal(t, map[string]string{string(oldEntryKey(1)): string(v1(1))}, rows(t, l, mustIdentity(tuple.Tuple{int64(7), "x"}), nil, nil))
	require.Equal(t, map[string]string{string(entryKey(1)): string(v1(1))}, rows(t, l, elsewhere, nil, nil))
}

// A rename crashed at every write commit of its run (the claim, each
// page's move, each checkpoint) in each way a commit fails (a fatal
// error, nothing written; a lost result, landed or not, which the store
// retries), on the memory and bbolt engines: a second runner resumes, and
// checkRenamed holds. A page is one engine transaction
// (fdblayer.MovePartitionPage), outside storetest.Faults' reach, so the
// faults are the engine's (fdbsim.InjectFaults), at the k-th commit the
// first runner makes.
func TestRenameSurvivesACrashAtEveryCommit(t *testing.T) {
	faults := []struct {
		name  string
		fault fdbsim.Fault
	}{
		{"fatal", fdbsim.CommitFatal},
		{"landed, result lost", fdbsim.CommitThenUnknown},
		{"not landed, result lost", fdbsim.UnknownWithoutCommit},
	}
	for _, e := range engines {
		if e.name == "mvcc" {
			continue // its faults are MVCCConfig.Fault's, met as the engine meets them
		}
		for _, ft := range faults {
			t.Run(e.name+"/"+ft.name, func(t *testing.T) {
				for k := 1; ; k++ {
					if !renameCrashAt(t, e.open(t), k, ft.fault) {
						require.Greater(t, k, books*3, "every commit of the run was crashed at")
						return
					}
				}
			})
		}
	}
}

// renameCrashAt seeds a store of before namespaces on inner and renames
// it, fault failing the first runner's k-th commit, then resumes with a
// second runner and checks the result; it reports whether the fault
// fired (false: the run made fewer commits).
func renameCrashAt(t *testing.T, inner kv.Engine, k int, fault fdbsim.Fault) bool {
	t.Helper()
	var armed, fired atomic.Bool
	var commits atomic.Int32
	e := fdbsim.InjectFaults(fdbsim.AsDistributed(inner), func(context.Context) (fdbsim.Fault, func()) {
		if armed.Load() && int(commits.Add(1)) == k {
			fired.Store(true)
			return fault, nil
		}
		return fdbsim.CommitNormally, nil
	})
	l, err := fdblayer.Open(e, fdblayer.Config{Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	seedOldLedger(t, l)
	before := oldBooks(t, l)
	rename, err := evolve.IntoNamespace(ledgergen.SchemaNamespace)
	require.NoError(t, err)
	m, err := evolve.RenamePartitionsMigration(l, evolve.RenameConfig{Name: "ledger.namespace", Rename: rename, PageRows: 5, Logger: quiet})
	require.NoError(t, err)
	clk := clock.NewManual(t0)

	armed.Store(true)
	_, err = newRunner(t, l, "first", clk, func(c *evolve.RunnerConfig) { c.Lease = time.Minute }).Run(t.Context(), m)
	armed.Store(false)
	if !fired.Load() {
		require.NoError(t, err)
		checkRenamed(t, l, before)
		return false
	}
	if fault == fdbsim.CommitFatal {
		require.ErrorIs(t, err, fdbsim.ErrInjectedFatal, "commit %d", k)
	}
	clk.Advance(2 * time.Minute) // a dead runner's lease lapses
	rep, err := newRunner(t, l, "second", clk).Run(t.Context(), m)
	require.NoError(t, err, "commit %d", k)
	require.True(t, rep.Checkpoint.IsDone())
	checkRenamed(t, l, before)
	return true
}

// IntoNamespace renames only what the schema parses once the namespace is
// put before it, and refuses a namespace no linked package declares.
func TestIntoNamespace(t *testing.T) {
	rename, err := evolve.IntoNamespace(ledgergen.SchemaNamespace)
	require.NoError(t, err)
	old := append(tuple.AppendUint(tuple.AppendUint(nil, 1), 3), oldEntryKey(9)...)
	n, to, ok := rename(old)
	require.True(t, ok)
	id, _ := oldBook(3).AppendTuple(nil)
	require.Equal(t, len(id), n)
	want, _ := ledgergen.BookPartition{Book: 3}.AppendTuple(nil)
	require.Equal(t, want, to)
	for _, key := range [][]byte{
		append(want, oldEntryKey(9)...),                      // namespaced already
		tuple.AppendString(tuple.AppendNull(nil), "mkitfdb"), // the library's
		tuple.AppendUint(tuple.AppendUint(nil, 7), 3),        // a variant the ledger does not declare
	} {
		_, _, ok := rename(key)
		require.False(t, ok, "%x", key)
	}
	_, err = evolve.IntoNamespace("nowhere")
	require.ErrorIs(t, err, registry.ErrNotLinked)
	_, err = evolve.RenamePartitionsMigration(nil, evolve.RenameConfig{Name: "n", Rename: rename})
	require.ErrorIs(t, err, store.ErrInvalid)
	l := openLayer(t, engines[0].open(t))
	for _, cfg := range []evolve.RenameConfig{{Rename: rename}, {Name: "n"}, {Name: "n", Rename: rename, PageRows: -1}} {
		_, err = evolve.RenamePartitionsMigration(l, cfg)
		require.ErrorIs(t, err, store.ErrInvalid)
	}
}

// The due index's first layout, moved by the Runner: DueIndexMigration's
// pages, checkpointed, done when the layout's range is empty.
func TestDueIndexMigrationRunsThroughTheRunner(t *testing.T) {
	l := openLayer(t, engines[0].open(t))
	rep, err := newRunner(t, l, "x", clock.NewManual(t0)).Run(context.Background(), evolve.DueIndexMigration(l))
	require.NoError(t, err)
	assert.True(t, rep.Checkpoint.IsDone())
	assert.Equal(t, evolve.DueIndexMigrationName, rep.Checkpoint.Name)
	assert.Zero(t, rep.Checkpoint.Rows)
}
