package evolve_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/internal/testkit/ledger/ledgergen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

const books = 4

// elsewhere is a partition of a namespace no linked package declares,
// holding a row at an entry's key with an entry's bytes: no migration of
// the ledger's may touch it.
var elsewhere = mustIdentity(tuple.Tuple{"elsewhere", int64(1)})

func mustIdentity(t tuple.Tuple) store.Identity {
	b, err := tuple.Pack(t)
	if err != nil {
		panic(err)
	}
	id, err := store.ParseIdentity(b)
	if err != nil {
		panic(err)
	}
	return id
}

// ledgerModel is what each book holds: the bytes last written at each key
// (by the seed or a writer), which a migration may only have upgraded.
type ledgerModel struct {
	mu    sync.Mutex
	books map[uint32]map[string]store.Value
}

func (m *ledgerModel) set(b uint32, k store.Key, v store.Value) {
	m.mu.Lock()
	m.books[b][string(k)] = v
	m.mu.Unlock()
}

// seedLedger writes 32 entries into each book: V1 entries, V2 with and
// without a note, a corrupt one and one of a newer version; and the row
// elsewhere.
func seedLedger(t *testing.T, s store.Store) *ledgerModel {
	t.Helper()
	m := &ledgerModel{books: map[uint32]map[string]store.Value{}}
	for bk := uint32(1); bk <= books; bk++ {
		m.books[bk] = map[string]store.Value{}
		b := store.NewBatch()
		for n := uint64(0); n < 30; n++ {
			var v store.Value
			switch n % 3 {
			case 0:
				v = v2(n, "seed")
			case 1:
				v = v1(n)
			default:
				v = v2(n, "")
			}
			b.Put(entryKey(n), v)
			m.books[bk][string(entryKey(n))] = v
		}
		b.Put(entryKey(100), corruptEntry).Put(entryKey(101), newerEntry)
		m.books[bk][string(entryKey(100))] = corruptEntry
		m.books[bk][string(entryKey(101))] = newerEntry
		mustApply(t, s, book(bk), b)
	}
	mustApply(t, s, elsewhere, store.NewBatch().Put(entryKey(1), v1(1)))
	return m
}

// writer writes entries into the books until stop is closed, as a service
// would beside the migration: each an unconditional put, recorded in the
// model once it committed.
func writer(t *testing.T, s store.Store, m *ledgerModel, seed uint64, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 7))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			bk, n := uint32(1+rng.IntN(books)), uint64(rng.IntN(40))
			var v store.Value
			switch rng.IntN(3) {
			case 0:
				v = v1(uint64(1000 + i))
			case 1:
				v = v2(uint64(1000+i), fmt.Sprintf("w%d", i))
			default:
				v = v2(uint64(1000+i), "")
			}
			out, err := s.Apply(context.Background(), book(bk), store.NewBatch().Put(entryKey(n), v))
			if err != nil || !out.Committed() {
				t.Errorf("writer: %v %v", out, err)
				return
			}
			m.set(bk, entryKey(n), v)
			time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
		}
	}()
	return &wg
}

// checkLedger checks each book against the model: every row holds the
// bytes last written, or (exact true: after a run with no writer) their
// upgrade, which is also what rows a run may have rewritten hold; rows
// left as they were are kept byte for byte; elsewhere is untouched.
func checkLedger(t *testing.T, s store.Store, m *ledgerModel, exact bool) {
	t.Helper()
	start, end := ledgergen.ClassRange(ledgergen.TagEntryKey)
	for bk, want := range m.books {
		got := rows(t, s, book(bk), start, end)
		require.Len(t, got, len(want), "book %d", bk)
		for k, v := range want {
			g := store.Value(got[k])
			up := upgraded(v)
			if exact {
				require.Equal(t, up, g, "book %d key %x: last written %x", bk, k, v)
				continue
			}
			require.True(t, string(g) == string(v) || string(g) == string(up),
				"book %d key %x holds %x: neither the last written %x nor its upgrade %x (an overwrite of a newer value)", bk, k, g, v, up)
		}
	}
	require.Equal(t, map[string]string{string(entryKey(1)): string(v1(1))}, rows(t, s, elsewhere, nil, nil), "another namespace's partition is untouched")
}

func entryMigration(t *testing.T, s store.Store, parts evolve.PartitionLister, pageRows int) evolve.Migration {
	t.Helper()
	start, end := ledgergen.ClassRange(ledgergen.TagEntryKey)
	m, err := evolve.KeyClassMigration(s, parts, evolve.KeyClassConfig{
		Name: "ledger.entry-v2", Namespace: ledgergen.SchemaNamespace, Start: start, End: end,
		Rewrite: evolve.Upgrade(entries.Decode, entries.Encode), Requires: 2, PageRows: pageRows, Logger: quiet,
	})
	require.NoError(t, err)
	return m
}

// A clean run rewrites every old entry to the newest version, keeps the
// newest ones, leaves the corrupt and the newer row (counted, and the run
// says so), and touches no other namespace's partition. A second run
// (Rerun) finds nothing to rewrite.
func TestKeyClassMigrationUpgradesEveryRow(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			l := openLayer(t, e.open(t))
			model := seedLedger(t, l)
			s := l // a new store: at ledger format 2, what this binary knows
			require.Equal(t, uint32(2), store.FormatOf(s, ledgergen.SchemaNamespace))
			r := newRunner(t, s, "x", clock.NewManual(t0))
			rep, err := r.Run(t.Context(), entryMigration(t, s, l, 7))
			require.NoError(t, err)
			checkLedger(t, l, model, true)
			cp := rep.Checkpoint
			assert.True(t, cp.IsDone())
			assert.Equal(t, uint64(books*32), cp.Rows)
			assert.Equal(t, uint64(books*10), cp.Rewritten, "the V1 entries")
			assert.Equal(t, uint64(books*2), cp.Left)
			assert.Equal(t, uint64(books), cp.Partitions)
			assert.Equal(t, uint64(books*5+1), cp.Pages, "32 rows in pages of 7 a book, and the page that finds no book left")
			assert.Contains(t, rep.String(), "done with 8 rows left")

			rep, err = r.Rerun(t.Context(), entryMigration(t, s, l, 7))
			require.NoError(t, err)
			assert.Zero(t, rep.Checkpoint.Rewritten)
			assert.Equal(t, uint64(books*32), rep.Checkpoint.Rows)
		})
	}
}

// The migration test of the issue: a crash at every page boundary (the
// page's commit failing, its commit landing with its result lost, the
// runner killed between the page and its checkpoint), with a writer
// changing entries all along, on memory, bbolt and MVCC. The next runner
// resumes, no row is ever overwritten with anything but the upgrade of
// what was last written there, and a last run with the writer stopped
// leaves exactly the model, upgraded.
func TestKeyClassMigrationSurvivesACrashAtEveryPage(t *testing.T) {
	for _, e := range engines {
		for _, cr := range pageCrashes {
			t.Run(e.name+"/"+cr.name, func(t *testing.T) {
				for boundary := 1; ; boundary++ {
					if !crashAt(t, e.open(t), boundary, cr.arm, cr.fails) {
						require.Greater(t, boundary, books*5, "every page boundary was crashed at")
						return
					}
				}
			})
		}
	}
}

// pageCrash is one way a KeyClassMigration run crashes at a page
// boundary: arm makes the boundary-th page (from 1) crash, and fired
// says whether it did; fails says whether the run that crashes returns
// an error.
type pageCrash struct {
	name  string
	arm   func(f *storetest.Faults, boundary int, fired *atomic.Bool)
	fails bool
}

// isPage tells a migration page's transaction (in a partition of the
// store) from the runner's own calls (in evolve.Partition).
func isPage(c storetest.Call) bool {
	return c.Method == storetest.MethodTransact && c.Partition != evolve.Partition
}

// pageCrashes are the three crashes at a page boundary: the page's commit
// fails, it lands with its result lost, or the runner is killed between
// the page and its checkpoint.
var pageCrashes = []pageCrash{
	{"the page fails", func(f *storetest.Faults, boundary int, fired *atomic.Bool) {
		var n atomic.Int32
		f.FailWhen(storetest.MethodTransact, func(c storetest.Call) bool {
			if isPage(c) && int(n.Add(1)) == boundary {
				fired.Store(true)
				return true
			}
			return false
		}, nil)
	}, true},
	{"the page lands, its result lost", func(f *storetest.Faults, boundary int, fired *atomic.Bool) {
		var n atomic.Int32
		f.CommitThenFailWhen(func(c storetest.Call) bool {
			if isPage(c) && int(n.Add(1)) == boundary {
				fired.Store(true)
				return true
			}
			return false
		})
	}, false},
	{"killed before the page's checkpoint", func(f *storetest.Faults, boundary int, fired *atomic.Bool) {
		var n atomic.Int32
		f.FailWhen(storetest.MethodApply, func(c storetest.Call) bool {
			// The first write is the claim; then a checkpoint a page.
			// Killed: none of its writes lands from then on.
			if c.Partition == evolve.Partition && int(n.Add(1)) >= boundary+1 {
				fired.Store(true)
				return true
			}
			return false
		}, nil)
	}, true},
}

// crashAt runs the migration on a fresh store of e with a writer beside
// it, crashing at the boundary-th page, then resumes it; it reports
// whether the crash fired (false: the run had fewer pages).
func crashAt(t *testing.T, e kv.Engine, boundary int, arm func(*storetest.Faults, int, *atomic.Bool), fails bool) bool {
	t.Helper()
	l := openLayer(t, e)
	model := seedLedger(t, l)
	f := storetest.NewFaults(l)
	s := f // the fault wrapper forwards the Layer's formats: ledger's is 2
	require.Equal(t, uint32(2), store.FormatOf(s, ledgergen.SchemaNamespace))
	clk := clock.NewManual(t0)
	var fired atomic.Bool
	arm(f, boundary, &fired)
	stop := make(chan struct{})
	wg := writer(t, l, model, uint64(boundary), stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	_, err := newRunner(t, s, "first", clk, func(c *evolve.RunnerConfig) { c.Lease = time.Minute }).Run(t.Context(), entryMigration(t, s, l, 7))
	if !fired.Load() {
		require.NoError(t, err)
		return false
	}
	if fails {
		require.ErrorIs(t, err, storetest.ErrInjected, "boundary %d", boundary)
	} else {
		require.NoError(t, err, "boundary %d", boundary)
	}
	f.Clear()
	clk.Advance(2 * time.Minute) // a dead runner's lease lapses
	rep, err := newRunner(t, s, "second", clk).Run(t.Context(), entryMigration(t, s, l, 7))
	require.NoError(t, err, "boundary %d", boundary)
	require.True(t, rep.Checkpoint.IsDone())
	close(stop)
	wg.Wait()
	if t.Failed() {
		return false
	}
	checkLedger(t, l, model, false)
	rep, err = newRunner(t, s, "third", clk).Rerun(t.Context(), entryMigration(t, s, l, 7))
	require.NoError(t, err)
	checkLedger(t, l, model, true)
	assert.Equal(t, uint64(books*2), rep.Checkpoint.Left, "the corrupt and the newer row of each book, and only they, are left")
	return true
}

// A migration that needs a format the store is not at refuses to run,
// writing nothing: on a Layer whose gate started the new store at ledger
// format 1 (its binary standing for one that knows only 1), and through
// storetest's fault wrapper over it, which forwards the Layer's formats.
func TestKeyClassMigrationRequiresItsFormat(t *testing.T) {
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{Logger: quiet, Gate: evolve.GateConfig{Known: map[string]uint32{ledgergen.SchemaNamespace: 1}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	require.Equal(t, uint32(1), store.FormatOf(l, ledgergen.SchemaNamespace))
	model := seedLedger(t, l)
	for _, s := range []store.Store{l, storetest.NewFaults(l)} {
		_, err := newRunner(t, s, "x", clock.NewManual(t0)).Run(t.Context(), entryMigration(t, s, l, 7))
		require.ErrorIs(t, err, wire.ErrFormatTooOld)
		require.ErrorContains(t, err, `needs store format 2 of namespace "ledger", the store's is 1`)
	}
	for bk, want := range model.books {
		start, end := ledgergen.ClassRange(ledgergen.TagEntryKey)
		got := rows(t, l, book(bk), start, end)
		for k, v := range want {
			require.Equal(t, string(v), got[k])
		}
	}
}

// Moves: rows of an old tag (a class renumbered from below 100) move to
// the class's tag, each page within the store's batch limits, a row whose
// new key is taken left as it is (never overwritten). Crashes:
// TestKeyClassMigrationMovesSurviveACrashAtEveryPage.
func TestKeyClassMigrationMovesRowsToANewTag(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			l, err := fdblayer.Open(e.open(t), fdblayer.Config{Logger: quiet, MaxBatchOps: 10})
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			for bk := uint32(1); bk <= 2; bk++ {
				b := store.NewBatch()
				for n := uint64(0); n < 9; n++ {
					b.Put(oldEntryKey(n), v1(n))
				}
				mustApply(t, l, book(bk), b)
			}
			// Book 2 already holds entry 4 at the new tag.
			mustApply(t, l, book(2), store.NewBatch().Put(entryKey(4), v2(44, "mine")))
			rep, err := newRunner(t, l, "x", clock.NewManual(t0)).Run(t.Context(), retagMigration(t, l, l))
			oldStart, oldEnd := evolve.TagRange(5)
			require.NoError(t, err)
			assert.Equal(t, uint64(17), rep.Checkpoint.Rewritten)
			assert.Equal(t, uint64(1), rep.Checkpoint.Left)
			assert.GreaterOrEqual(t, rep.Checkpoint.Pages, uint64(9), "two moves (8 operations) a page of 10")
			cs, ce := ledgergen.ClassRange(ledgergen.TagEntryKey)
			for bk := uint32(1); bk <= 2; bk++ {
				got := rows(t, l, book(bk), cs, ce)
				require.Len(t, got, 9)
				for n := uint64(0); n < 9; n++ {
					want := v1(n)
					if bk == 2 && n == 4 {
						want = v2(44, "mine")
					}
					require.Equal(t, string(want), got[string(entryKey(n))])
				}
				old := rows(t, l, book(bk), oldStart, oldEnd)
				if bk == 2 {
					require.Equal(t, map[string]string{string(oldEntryKey(4)): string(v1(4))}, old, "the row whose new key was taken stays")
				} else {
					require.Empty(t, old)
				}
			}
		})
	}
}

// The rows of TestKeyClassMigrationMovesSurviveACrashAtEveryPage: moveRows
// rows at tag 5 in each of moveBooks books, moved to the entry class's
// tag two a page (a Layer of 10 operations a batch).
const moveBooks, moveRows = 2, 9

func retagMigration(t *testing.T, s store.Store, parts evolve.PartitionLister) evolve.Migration {
	t.Helper()
	start, end := evolve.TagRange(5)
	m, err := evolve.KeyClassMigration(s, parts, evolve.KeyClassConfig{
		Name: "ledger.retag", Namespace: ledgergen.SchemaNamespace, Start: start, End: end,
		Rewrite: evolve.Retag(5, uint64(ledgergen.TagEntryKey)), Logger: quiet,
	})
	require.NoError(t, err)
	return m
}

// Moves survive a crash at every page boundary as rewrites do (each of
// pageCrashes, on every engine), with a service writing the class's new
// tag beside the migration: the next runner resumes; a row moves whole,
// once, to its new key; a move never overwrites what the service wrote
// there, and the row it could not move stays at its old key as it was,
// never lost; and a Rerun after moves nothing.
func TestKeyClassMigrationMovesSurviveACrashAtEveryPage(t *testing.T) {
	for _, e := range engines {
		for _, cr := range pageCrashes {
			t.Run(e.name+"/"+cr.name, func(t *testing.T) {
				for boundary := 1; ; boundary++ {
					// How many pages a run takes depends on the service:
					// a row whose new key it took first costs its page no
					// operation. The loop ends at the first run with
					// fewer pages than the boundary, checked like the rest.
					if !crashMoveAt(t, e.open(t), boundary, cr) {
						require.Greater(t, boundary, moveBooks, "several page boundaries were crashed at")
						return
					}
				}
			})
		}
	}
}

// crashMoveAt runs the retag on a fresh store of e with a service writing
// beside it, crashing at the boundary-th page, then resumes it, and
// checks the outcome; it reports whether the crash fired (false: the run
// had fewer pages, and finished).
func crashMoveAt(t *testing.T, e kv.Engine, boundary int, cr pageCrash) bool {
	t.Helper()
	l, err := fdblayer.Open(e, fdblayer.Config{Logger: quiet, MaxBatchOps: 10})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	for bk := uint32(1); bk <= moveBooks; bk++ {
		b := store.NewBatch()
		for n := uint64(0); n < moveRows; n++ {
			b.Put(oldEntryKey(n), v1(n))
		}
		mustApply(t, l, book(bk), b)
	}
	f := storetest.NewFaults(l)
	clk := clock.NewManual(t0)
	var crashed atomic.Bool
	cr.arm(f, boundary, &crashed)

	// The service writes entries at the new tag (some of the moved rows'
	// keys, some others) until stop is closed; wrote is the last value it
	// committed at each key of each book.
	var mu sync.Mutex
	wrote := map[uint32]map[uint64]store.Value{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(uint64(boundary), 11))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			bk, n := uint32(1+rng.IntN(moveBooks)), uint64(rng.IntN(moveRows+3))
			v := v2(uint64(1000+i), "service")
			out, err := l.Apply(context.Background(), book(bk), store.NewBatch().Put(entryKey(n), v))
			if err != nil || !out.Committed() {
				t.Errorf("service: %v %v", out, err)
				return
			}
			mu.Lock()
			if wrote[bk] == nil {
				wrote[bk] = map[uint64]store.Value{}
			}
			wrote[bk][n] = v
			mu.Unlock()
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		}
	}()
	stopService := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopService()

	rep, err := newRunner(t, f, "first", clk, func(c *evolve.RunnerConfig) { c.Lease = time.Minute }).Run(t.Context(), retagMigration(t, f, l))
	fired := crashed.Load()
	f.Clear()
	switch {
	case !fired:
		require.NoError(t, err)
	case cr.fails:
		require.ErrorIs(t, err, storetest.ErrInjected, "boundary %d", boundary)
	default:
		require.NoError(t, err, "boundary %d", boundary)
	}
	if fired {
		clk.Advance(2 * time.Minute) // a dead runner's lease lapses
		rep, err = newRunner(t, f, "second", clk).Run(t.Context(), retagMigration(t, f, l))
		require.NoError(t, err, "boundary %d", boundary)
	}
	require.True(t, rep.Checkpoint.IsDone())
	stopService()
	if t.Failed() {
		t.FailNow() // the service failed
	}

	newStart, newEnd := ledgergen.ClassRange(ledgergen.TagEntryKey)
	oldStart, oldEnd := evolve.TagRange(5)
	left := 0
	for bk := uint32(1); bk <= moveBooks; bk++ {
		moved, old := rows(t, l, book(bk), newStart, newEnd), rows(t, l, book(bk), oldStart, oldEnd)
		wantNew, wantOld := 0, 0
		for n := uint64(0); n < moveRows+3; n++ {
			w, written := wrote[bk][n]
			g, hasNew := moved[string(entryKey(n))]
			o, hasOld := old[string(oldEntryKey(n))]
			switch {
			case written:
				require.Equal(t, string(w), g, "book %d entry %d: the service's last write, never overwritten by a move (boundary %d)", bk, n, boundary)
				wantNew++
			case n < moveRows:
				require.Equal(t, string(v1(n)), g, "book %d entry %d moved whole (boundary %d)", bk, n, boundary)
				wantNew++
			default:
				require.False(t, hasNew, "book %d entry %d", bk, n)
			}
			if hasOld {
				require.Less(t, n, uint64(moveRows))
				require.Equal(t, string(v1(n)), o, "book %d entry %d left as it was", bk, n)
				require.True(t, written, "book %d entry %d left at its old key though its new key was free (boundary %d)", bk, n, boundary)
				wantOld++
			}
		}
		require.Len(t, moved, wantNew, "book %d: rows at the new tag", bk)
		require.Len(t, old, wantOld, "book %d: rows left at the old tag", bk)
		left += wantOld
	}
	rep, err = newRunner(t, f, "third", clk).Rerun(t.Context(), retagMigration(t, f, l))
	require.NoError(t, err)
	assert.Zero(t, rep.Checkpoint.Rewritten, "a Rerun moves nothing")
	assert.Equal(t, uint64(left), rep.Checkpoint.Left, "the rows whose new key the service took, and only they, are left")
	return fired
}

// What KeyClassMigration refuses.
func TestKeyClassMigrationRefusesBadConfig(t *testing.T) {
	l := openLayer(t, memengine.New())
	start, end := ledgergen.ClassRange(ledgergen.TagEntryKey)
	ok := evolve.KeyClassConfig{Name: "n", Namespace: "ledger", Start: start, End: end, Rewrite: evolve.Retag(1, 2)}
	for name, mod := range map[string]func(*evolve.KeyClassConfig){
		"no name":        func(c *evolve.KeyClassConfig) { c.Name = "" },
		"no namespace":   func(c *evolve.KeyClassConfig) { c.Namespace = "" },
		"not linked":     func(c *evolve.KeyClassConfig) { c.Namespace = "nowhere" },
		"empty range":    func(c *evolve.KeyClassConfig) { c.End = c.Start },
		"no rewrite":     func(c *evolve.KeyClassConfig) { c.Rewrite = nil },
		"negative pages": func(c *evolve.KeyClassConfig) { c.PageRows = -1 },
	} {
		cfg := ok
		mod(&cfg)
		_, err := evolve.KeyClassMigration(l, l, cfg)
		require.ErrorIs(t, err, store.ErrInvalid, name)
	}
	_, err := evolve.KeyClassMigration(nil, l, ok)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = evolve.KeyClassMigration(l, l, ok)
	require.NoError(t, err)
}

// plain is a store with no extension but its format: Transact reads and
// applies separately, so only the page's guards stand between it and a
// concurrent writer.
type plain struct {
	s      store.Store
	format uint32
}

func (p plain) Format(string) uint32 { return p.format }
func (p plain) Get(ctx context.Context, pt store.Partition, k store.Key) (store.Value, bool, error) {
	return p.s.Get(ctx, pt, k)
}
func (p plain) GetMany(ctx context.Context, pt store.Partition, ks []store.Key) ([]store.Value, error) {
	return p.s.GetMany(ctx, pt, ks)
}
func (p plain) Scan(ctx context.Context, pt store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	return p.s.Scan(ctx, pt, start, end, after, limit)
}
func (p plain) Apply(ctx context.Context, pt store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	return p.s.Apply(ctx, pt, b)
}
func (p plain) Capabilities() store.Capabilities { return p.s.Capabilities() }
func (p plain) Stats(ctx context.Context, pt store.Partition) (store.PartitionStats, error) {
	return p.s.Stats(ctx, pt)
}
func (p plain) Probe(ctx context.Context) error { return p.s.Probe(ctx) }

// A writer that changes a row between a page's read and its write makes
// the page's guard fail: the page reads again and rewrites what the
// writer wrote, never the value it read before.
func TestKeyClassMigrationNeverOverwritesAConcurrentWrite(t *testing.T) {
	l := openLayer(t, memengine.New())
	model := seedLedger(t, l)
	f := storetest.NewFaults(l)
	wrote := 0
	f.BeforeApply(func(ctx context.Context, p store.Partition, b *store.Batch) error {
		if p == evolve.Partition || wrote >= 3 {
			return nil
		}
		// The page rewrites the V1 entries it read: write a newer V1 to
		// the first of them, as a service would meanwhile.
		for _, w := range b.Writes {
			id, err := p.AppendTuple(nil)
			if err != nil {
				return err
			}
			lp, err := ledgergen.ParsePartition(id)
			if err != nil {
				return err
			}
			bk := lp.(ledgergen.BookPartition).Book
			v := v1(9000 + uint64(wrote))
			if _, err := f.Inner().Apply(ctx, p, store.NewBatch().Put(w.Key, v)); err != nil {
				return err
			}
			model.set(bk, w.Key, v)
			wrote++
			return nil
		}
		return nil
	})
	s := plain{f, 2}
	rep, err := newRunner(t, s, "x", clock.NewManual(t0)).Run(t.Context(), entryMigration(t, s, l, 7))
	require.NoError(t, err)
	require.Equal(t, 3, wrote)
	assert.Equal(t, uint64(3), rep.Checkpoint.Conflicts)
	checkLedger(t, l, model, true)
}
