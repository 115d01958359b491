package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// copyK is the function most of these tests run: it reads k and puts its
// value at "copy", guarded by what it read; runs counts its runs.
func (ff *faultsFixture) copyK(runs *int) store.TransactFunc {
	return func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		*runs++
		v, _, err := r.Get(ctx, store.Key("k"))
		if err != nil {
			return nil, err
		}
		return store.NewBatch().Require(store.Guard(store.Key("k"), v)).Put(store.Key("copy"), v), nil
	}
}

func (ff *faultsFixture) innerValue(t *testing.T, key string) string {
	t.Helper()
	v, _, err := ff.f.Inner().Get(ff.ctx, ff.p, store.Key(key))
	noErr(t, err, "inner Get")
	return string(v)
}

// TestFaultsTransactReadsAreFaulted: the function's reads are counted and
// faulted as reads, in the inner store's transaction; the call itself is
// counted once.
func TestFaultsTransactReadsAreFaulted(t *testing.T) {
	ff := newFaultsFixture(t)
	runs := 0
	out, err := ff.f.TransactOnce(ff.ctx, ff.p, ff.copyK(&runs))
	if err != nil || !out.Committed() || ff.innerValue(t, "copy") != "v" {
		t.Fatalf("TransactOnce = %v, %v, copy %q; want committed, v", out, err, ff.innerValue(t, "copy"))
	}
	if ff.f.Calls(MethodTransact) != 1 || ff.f.Calls(MethodGet) != 1 || ff.f.Calls(MethodApply) != 0 {
		t.Fatalf("calls: TransactOnce %d, Get %d, Apply %d; want 1, 1, 0",
			ff.f.Calls(MethodTransact), ff.f.Calls(MethodGet), ff.f.Calls(MethodApply))
	}
	injected := errors.New("read lost")
	ff.f.FailNext(MethodGet, injected)
	_, err = ff.f.TransactOnce(ff.ctx, ff.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		if _, _, err := r.Get(ctx, store.Key("k")); err != nil {
			return nil, err
		}
		return store.NewBatch().Put(store.Key("unreached"), store.Value("x")), nil
	})
	if !errors.Is(err, injected) || ff.innerHas(t, "unreached") {
		t.Fatalf("TransactOnce after a failed read: %v; want the read's error, nothing written", err)
	}
}

// TestFaultsTransactRulesSeeTheBatch: failure rules of TransactOnce are
// matched once the function returned its batch, and a match writes
// nothing; a commit-then-fail rule withholds a committed outcome.
func TestFaultsTransactRulesSeeTheBatch(t *testing.T) {
	ff := newFaultsFixture(t)
	ff.f.FailWhen(MethodTransact, func(c Call) bool {
		return c.Batch != nil && len(c.Batch.Writes) > 0 && string(c.Batch.Writes[0].Key) == "poison"
	}, nil)
	put := func(key string) store.TransactFunc {
		return func(context.Context, store.Reader) (*store.Batch, error) {
			return store.NewBatch().Put(store.Key(key), store.Value("x")), nil
		}
	}
	_, err := ff.f.TransactOnce(ff.ctx, ff.p, put("poison"))
	wantSentinel(t, err, store.ErrUnavailable, "TransactOnce of a matching batch")
	if ff.innerHas(t, "poison") {
		t.Fatal("a failed TransactOnce wrote")
	}
	_, err = ff.f.TransactOnce(ff.ctx, ff.p, put("fine"))
	noErr(t, err, "TransactOnce of another batch")

	ff.f.CommitThenFailNext()
	_, err = ff.f.TransactOnce(ff.ctx, ff.p, put("lost"))
	wantSentinel(t, err, store.ErrUnknownResult, "TransactOnce with its result withheld")
	if !ff.innerHas(t, "lost") {
		t.Fatal("TransactOnce reported an unknown result but did not commit")
	}
	ff.f.CommitThenFailWhen(nil)
	out, err := ff.f.TransactOnce(ff.ctx, ff.p, func(context.Context, store.Reader) (*store.Batch, error) {
		return store.NewBatch().Require(store.Absent(store.Key("k"))).Put(store.Key("z"), store.Value("z")), nil
	})
	if err != nil || out.Outcome != store.PreconditionFailed {
		t.Fatalf("TransactOnce of a failing guard = %v, %v; want its outcome, as usual", out, err)
	}
}

// TestFaultsTransactDelay: TransactOnce waits its delay first; a context
// that ends during it fails the call before the function runs.
func TestFaultsTransactDelay(t *testing.T) {
	ff := newFaultsFixture(t)
	ff.f.Delay(MethodTransact, time.Hour)
	ctx, cancel := context.WithTimeout(ff.ctx, 10*time.Millisecond)
	defer cancel()
	runs := 0
	_, err := ff.f.TransactOnce(ctx, ff.p, ff.copyK(&runs))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnavailable) || runs != 0 {
		t.Fatalf("TransactOnce ended during its delay: %v after %d runs; want the context's end, no run", err, runs)
	}
}

// TestFaultsTransactHooks: with hooks configured the function runs
// outside the inner store's transaction, and its reads are validated in
// it: a hook's write to a row the function read makes it run again on the
// new value, a hook's write to a row it only guards fails that guard, and
// a hook may write from inside the function's reads without waiting for
// any transaction.
func TestFaultsTransactHooks(t *testing.T) {
	t.Run("read row changed", func(t *testing.T) {
		ff := newFaultsFixture(t)
		writes := 0
		ff.f.BeforeApply(func(ctx context.Context, p store.Partition, _ *store.Batch) error {
			if writes++; writes > 1 {
				return nil
			}
			_, err := ff.f.Inner().Apply(ctx, p, store.NewBatch().Put(store.Key("k"), store.Value("v2")))
			return err
		})
		runs := 0
		out, err := ff.f.TransactOnce(ff.ctx, ff.p, ff.copyK(&runs))
		if err != nil || !out.Committed() || runs != 2 || ff.innerValue(t, "copy") != "v2" {
			t.Fatalf("TransactOnce = %v, %v after %d runs, copy %q; want committed after 2 runs, v2", out, err, runs, ff.innerValue(t, "copy"))
		}
	})
	t.Run("guarded row changed", func(t *testing.T) {
		ff := newFaultsFixture(t)
		ff.f.BeforeApply(func(ctx context.Context, p store.Partition, _ *store.Batch) error {
			_, err := ff.f.Inner().Apply(ctx, p, store.NewBatch().Put(store.Key("gate"), store.Value("shut")))
			return err
		})
		runs := 0
		out, err := ff.f.TransactOnce(ff.ctx, ff.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			b, err := ff.copyK(&runs)(ctx, r)
			return b.Require(store.Absent(store.Key("gate"))), err
		})
		if err != nil || out.Outcome != store.PreconditionFailed || out.FailedIndex != 1 || runs != 1 {
			t.Fatalf("TransactOnce = %v, %v after %d runs; want the gate's guard failed, 1 run", out, err, runs)
		}
		if ff.innerHas(t, "copy") {
			t.Fatal("a failed batch wrote")
		}
	})
	t.Run("hook writes during a read", func(t *testing.T) {
		ff := newFaultsFixture(t)
		once := false
		ff.f.AfterRead(func(ctx context.Context, c Call) error {
			if once || c.Method != MethodGet {
				return nil
			}
			once = true
			_, err := ff.f.Inner().Apply(ctx, ff.p, store.NewBatch().Put(store.Key("k"), store.Value("v3")))
			return err
		})
		runs := 0
		done := make(chan error, 1)
		go func() {
			_, err := ff.f.TransactOnce(ff.ctx, ff.p, ff.copyK(&runs))
			done <- err
		}()
		select {
		case err := <-done:
			noErr(t, err, "TransactOnce")
		case <-time.After(10 * time.Second):
			t.Fatal("TransactOnce did not return: the hook's write waits for the transaction")
		}
		if runs != 2 || ff.innerValue(t, "copy") != "v3" {
			t.Fatalf("%d runs, copy %q; want 2 runs, the hook's v3", runs, ff.innerValue(t, "copy"))
		}
	})
	t.Run("function error after a changed read", func(t *testing.T) {
		ff := newFaultsFixture(t)
		once := false
		ff.f.AfterRead(func(ctx context.Context, c Call) error {
			if once {
				return nil
			}
			once = true
			_, err := ff.f.Inner().Apply(ctx, ff.p, store.NewBatch().Put(store.Key("k"), store.Value("v4")))
			return err
		})
		var seen []string
		_, err := ff.f.TransactOnce(ff.ctx, ff.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			v, _, err := r.Get(ctx, store.Key("k"))
			if err != nil {
				return nil, err
			}
			seen = append(seen, string(v))
			return nil, fmt.Errorf("saw %s", v)
		})
		if err == nil || err.Error() != "saw v4" || len(seen) != 2 {
			t.Fatalf("TransactOnce = %v after reading %v; want the error of the run whose reads held, after 2 runs", err, seen)
		}
	})
	t.Run("reads that never hold", func(t *testing.T) {
		ff := newFaultsFixture(t)
		n := 0
		ff.f.BeforeApply(func(ctx context.Context, p store.Partition, _ *store.Batch) error {
			n++
			_, err := ff.f.Inner().Apply(ctx, p, store.NewBatch().Put(store.Key("k"), store.Value(fmt.Sprint("v", n))))
			return err
		})
		runs := 0
		_, err := ff.f.TransactOnce(ff.ctx, ff.p, ff.copyK(&runs))
		wantSentinel(t, err, store.ErrUnavailable, "TransactOnce whose reads always change")
		if runs != maxValidations || ff.innerHas(t, "copy") {
			t.Fatalf("%d runs, copy written %v; want %d runs, nothing written", runs, ff.innerHas(t, "copy"), maxValidations)
		}
	})
}

// storeOnlyModel hides the model's TransactOnce.
type storeOnlyModel struct{ store.Store }

// TestFaultsTransactOverAPlainStore: over a store that is not a
// store.Transactor, TransactOnce reads through the Faults and applies the
// batch with an Apply of its own, faulted as Apply calls are.
func TestFaultsTransactOverAPlainStore(t *testing.T) {
	f := NewFaults(storeOnlyModel{newModel(clock.NewManual(suiteEpoch), fdbLikeCaps)})
	ff := &faultsFixture{f: f, ctx: t.Context(), p: Partition{Name: "plain"}}
	_, err := f.Inner().Apply(ff.ctx, ff.p, store.NewBatch().Put(store.Key("k"), store.Value("v")))
	noErr(t, err, "seeding")
	runs := 0
	out, err := f.TransactOnce(ff.ctx, ff.p, ff.copyK(&runs))
	if err != nil || !out.Committed() || ff.innerValue(t, "copy") != "v" {
		t.Fatalf("TransactOnce = %v, %v; want committed", out, err)
	}
	if f.Calls(MethodTransact) != 1 || f.Calls(MethodGet) != 1 || f.Calls(MethodApply) != 1 {
		t.Fatalf("calls: TransactOnce %d, Get %d, Apply %d; want 1 each",
			f.Calls(MethodTransact), f.Calls(MethodGet), f.Calls(MethodApply))
	}
	f.FailNext(MethodApply, nil)
	_, err = f.TransactOnce(ff.ctx, ff.p, func(context.Context, store.Reader) (*store.Batch, error) {
		return store.NewBatch().Put(store.Key("unreached"), store.Value("x")), nil
	})
	wantSentinel(t, err, store.ErrUnavailable, "TransactOnce whose Apply fails")
	if ff.innerHas(t, "unreached") {
		t.Fatal("a failed Apply wrote")
	}
}
