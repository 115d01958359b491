package leases_test

import (
	"context"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// The reference's test module, one test per Rust test, same scenario and
// assertions, on every engine. Where the reference matched
// StoreError::Invalid, these check store.ErrInvalid and the package's
// sentinel that says which invalid input it was.

// pages_and_inserts_preserve_scan_start_ceiling
func TestPagesAndInsertsPreserveScanStartCeiling(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.putLease(t, 0, 40, 200)
		e.putLease(t, 2, 90, 200)
		checkpoint := carried(t, e.mustPending(t, t0.Add(100*time.Millisecond), nil, 1))
		if !checkpoint.Ceiling().Equal(t0.Add(100*time.Millisecond)) || !checkpoint.Minimum().Equal(t0.Add(40*time.Millisecond)) || checkpoint.Coordinator() != coordinator {
			t.Fatalf("decoded checkpoint: ceiling %v, minimum %v, coordinator %s; want 100ms and 40ms after the epoch, %s",
				checkpoint.Ceiling(), checkpoint.Minimum(), checkpoint.Coordinator(), coordinator)
		}

		other := refdomain.CoordinatorPartition{NS: refdomain.MustNamespaceKey("another")}
		_, _, err := table.Step(e.ctx, e.s, other, t0.Add(150*time.Millisecond), checkpoint, 1)
		requireErr(t, err, []error{store.ErrInvalid, watermark.ErrCheckpoint}, "coordinator(default)", "not coordinator(another)")

		e.putLease(t, 1, 70, 200) // ahead of the cursor: read, and lower than 90
		checkpoint = e.mustPending(t, t0.Add(150*time.Millisecond), checkpoint, 1)
		if !checkpoint.Ceiling().Equal(t0.Add(100 * time.Millisecond)) {
			t.Fatalf("second page: ceiling %v; want the scan start's, 100ms after the epoch", checkpoint.Ceiling())
		}
		if got := e.mustComplete(t, t0.Add(150*time.Millisecond), checkpoint, 1); !got.Equal(t0.Add(40 * time.Millisecond)) {
			t.Fatalf("watermark %v; want 40ms after the epoch", got)
		}

		page, err := table.ActiveShards(e.ctx, e.s, coordinator, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Shards) != 1 || page.Shards[0] != source(0) {
			t.Fatalf("shards %v; want [%s]", page.Shards, source(0))
		}
		if page.Next == nil {
			t.Fatal("first shard page has no next cursor")
		}
	})
}

// resume_rejects_a_new_recovery_generation
func TestResumeRejectsANewRecoveryGeneration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.putLease(t, 0, 40, 200)
		e.putLease(t, 1, 90, 200)
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 90)).Put(reconcileKey, reconciled(t, 91)))
		checkpoint := carried(t, e.mustPending(t, t0.Add(100*time.Millisecond), nil, 1))

		// A new recovery, reconciled: not recovering, but another generation.
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 110)).Put(reconcileKey, reconciled(t, 111)))
		_, _, err := e.step(t0.Add(120*time.Millisecond), checkpoint, 1)
		requireErr(t, err, []error{store.ErrInvalid, watermark.ErrGenerationChanged},
			"started with {recovery at 90 ms, reconcile at 91 ms}", "now {recovery at 110 ms, reconcile at 111 ms}")

		// A newer recovery with the reconcile marker deleted.
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 130)).Delete(reconcileKey))
		_, _, err = e.step(t0.Add(140*time.Millisecond), checkpoint, 1)
		requireErr(t, err, []error{store.ErrInvalid, watermark.ErrGenerationChanged}, "now {recovery at 130 ms, reconcile absent}")

		// A marker that does not decode is a change too, found before decoding.
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, store.Value("corrupt marker")))
		_, _, err = e.step(t0.Add(150*time.Millisecond), checkpoint, 1)
		requireErr(t, err, []error{store.ErrInvalid, watermark.ErrGenerationChanged}, "now {recovery 14 undecodable bytes")
	})
}

// final_page_rechecks_recovery_generation: a recovery lands between the
// last page's scan and the end of the step (the reference's
// RecoverDuringScan store).
func TestFinalPageRechecksRecoveryGeneration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.putLease(t, 0, 40, 200)
		recovered := false
		e.s.AfterRead(func(ctx context.Context, c storetest.Call) error {
			if c.Method != storetest.MethodScan || recovered {
				return nil
			}
			recovered = true
			out, err := e.s.Inner().Apply(ctx, c.Partition, store.NewBatch().Put(recoveryKey, recovery(t, 110)))
			if err == nil && !out.Committed() {
				t.Errorf("inject recovery: %v", out)
			}
			return err
		})
		next, value, err := e.step(t0.Add(100*time.Millisecond), nil, 10)
		if !recovered {
			t.Fatal("the step scanned nothing: no recovery injected")
		}
		if next != nil {
			t.Fatalf("step returned a checkpoint; want the last page to fail")
		}
		requireErr(t, err, []error{store.ErrInvalid, watermark.ErrGenerationChanged}, "started with {recovery absent, reconcile absent}", "now {recovery at 110 ms")
		if !value.IsZero() {
			t.Fatalf("failed step returned watermark %v", value)
		}
	})
}

// a_new_row_behind_the_cursor_is_excluded_by_the_scan_ceiling
func TestANewRowBehindTheCursorIsExcludedByTheScanCeiling(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.putLease(t, 1, 80, 200)
		e.putLease(t, 2, 90, 200)
		checkpoint := e.mustPending(t, t0.Add(100*time.Millisecond), nil, 1)
		e.putLease(t, 0, 0, 200) // behind the cursor
		value := e.mustComplete(t, t0.Add(120*time.Millisecond), checkpoint, 1)
		if !value.Equal(t0.Add(80 * time.Millisecond)) {
			t.Fatalf("watermark %v; want 80ms after the epoch", value)
		}
		if value.After(t0.Add(100 * time.Millisecond)) {
			t.Fatalf("watermark %v above the scan-start ceiling, 100ms after the epoch", value)
		}
	})
}

// corruption_and_recovery_fail_closed
func TestCorruptionAndRecoveryFailClosed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.apply(t, coordinator, store.NewBatch().Put(leaseKey(t, 0), store.Value("bad")))
		_, err := table.Watermark(e.ctx, e.s, coordinator, t0.Add(100*time.Millisecond))
		requireErr(t, err, []error{store.ErrCorrupt}, "LeasedShard", "r0")
		_, err = table.ActiveShards(e.ctx, e.s, coordinator, nil, 10)
		requireErr(t, err, []error{store.ErrCorrupt}, "LeasedShard")

		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 100)))
		_, err = table.Watermark(e.ctx, e.s, coordinator, t0.Add(200*time.Millisecond))
		requireErr(t, err, []error{watermark.ErrRecovering}, "recovered at 100 ms")

		if err := table.MarkReconciled(e.ctx, e.s, coordinator, t0.Add(101*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		_, err = table.Watermark(e.ctx, e.s, coordinator, t0.Add(200*time.Millisecond))
		requireErr(t, err, []error{store.ErrCorrupt}, "LeasedShard")
	})
}
