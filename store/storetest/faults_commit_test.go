package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

// commitBatches are a Commit's batches to two partitions, each putting
// key c.
func commitBatches() []store.PartitionBatch {
	return []store.PartitionBatch{
		{Partition: Partition{Name: "faults-a"}, Batch: store.NewBatch().Put(store.Key("c"), store.Value("a"))},
		{Partition: Partition{Name: "faults-b"}, Batch: store.NewBatch().Put(store.Key("c"), store.Value("b"))},
	}
}

// A Commit is counted and numbered among the calls that may commit, its
// failure rule fails it without reaching the inner store, a commit-then-fail
// rule withholds a result that landed, and BeforeApply hooks run for each
// of its batches.
func TestFaultsCommit(t *testing.T) {
	ff := newFaultsFixture(t)
	var hooked []string
	ff.f.BeforeApply(func(_ context.Context, p store.Partition, _ *store.Batch) error {
		hooked = append(hooked, store.PartitionName(p))
		return nil
	})
	ff.f.FailNth(MethodCommit, 1, nil)
	_, err := ff.f.Commit(ff.ctx, commitBatches())
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("first Commit: %v, want the injected fault", err)
	}
	if v, _, _ := ff.f.Inner().Get(ff.ctx, Partition{Name: "faults-a"}, store.Key("c")); v != nil {
		t.Fatal("a failed Commit reached the inner store")
	}
	ff.f.CommitThenFailNext()
	_, err = ff.f.Commit(ff.ctx, commitBatches())
	if !errors.Is(err, store.ErrUnknownResult) {
		t.Fatalf("second Commit: %v, want ErrUnknownResult", err)
	}
	for _, pb := range commitBatches() {
		if v, _, _ := ff.f.Inner().Get(ff.ctx, pb.Partition, store.Key("c")); v == nil {
			t.Fatalf("the withheld Commit did not land in %v", pb.Partition)
		}
	}
	if got := ff.f.Calls(MethodCommit); got != 2 {
		t.Fatalf("Calls(MethodCommit) = %d, want 2", got)
	}
	if want := []string{store.PartitionName(Partition{Name: "faults-a"}), store.PartitionName(Partition{Name: "faults-b"})}; len(hooked) != 2 || hooked[0] != want[0] || hooked[1] != want[1] {
		t.Fatalf("BeforeApply ran for %v, want each batch of the Commit that reached the store", hooked)
	}
}

// A TransactManyOnce's function reads through the Faults (counted as
// reads), and with a hook configured its batches commit only on the state
// it read: a hook that changes a row the function read makes it run
// again.
func TestFaultsTransactManyRerunsOnChangedRead(t *testing.T) {
	ff := newFaultsFixture(t)
	a, b := Partition{Name: "faults-a"}, Partition{Name: "faults-b"}
	changed := false
	ff.f.BeforeApply(func(ctx context.Context, p store.Partition, _ *store.Batch) error {
		if !changed {
			changed = true
			_, err := ff.f.Inner().Apply(ctx, a, store.NewBatch().Put(store.Key("n"), store.Value("2")))
			return err
		}
		return nil
	})
	runs := 0
	reads := ff.f.Calls(MethodGet)
	out, err := ff.f.TransactManyOnce(ff.ctx, []store.Partition{a, b}, func(ctx context.Context, rs []store.Reader) ([]*store.Batch, error) {
		runs++
		v, _, err := rs[0].Get(ctx, store.Key("n"))
		if err != nil {
			return nil, err
		}
		return []*store.Batch{nil, store.NewBatch().Put(store.Key("copy"), append(store.Value("n="), v...))}, nil
	})
	noErr(t, err, "TransactManyOnce")
	if !out.Committed() || runs != 2 {
		t.Fatalf("outcome %v after %d runs, want committed after 2 (the hook changed a row the first read)", out, runs)
	}
	if v, _, _ := ff.f.Inner().Get(ff.ctx, b, store.Key("copy")); string(v) != "n=2" {
		t.Fatalf("copy = %q, want the value the second run read", v)
	}
	if ff.f.Calls(MethodGet) == reads {
		t.Fatal("the function's reads were not counted")
	}
}
