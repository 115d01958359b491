package fdbengine_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/fdbengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/fdbcode"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// openOrSkip opens the cluster FDB_CLUSTER_FILE names, skipping the test
// when none is set or it does not answer within 5 s.
func openOrSkip(t *testing.T) *fdbengine.Engine {
	t.Helper()
	cf := os.Getenv("FDB_CLUSTER_FILE")
	if cf == "" {
		t.Skip("FoundationDB tests need a cluster: set FDB_CLUSTER_FILE to its cluster file, " +
			"or run make test-fdb in the main module (scripts/test-fdb.sh), which starts a throwaway fdbserver and runs these tests")
	}
	e, err := fdbengine.Open(fdbengine.Config{ClusterFile: cf})
	if err != nil {
		t.Fatalf("Open(%q): %v", cf, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := e.Probe(ctx); err != nil {
		t.Skipf("the FoundationDB cluster of %s does not answer within 5s (%v); run make test-fdb for a throwaway one", cf, err)
	}
	return e
}

// testRoot returns a root prefix of this test's own on the shared
// cluster, the tuple ("mkitfdb-test", "<16 hex digits>"), whose keys are
// cleared when the test ends.
func testRoot(t *testing.T, e *fdbengine.Engine) []byte {
	t.Helper()
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	root := append([]byte("\x02mkitfdb-test\x00\x02"), hex.EncodeToString(id)...)
	root = append(root, 0x00)
	t.Cleanup(func() {
		_, err := e.DB().Transact(func(tr fdb.Transaction) (any, error) {
			tr.ClearRange(fdb.KeyRange{Begin: fdb.Key(root), End: fdb.Key(append(bytes.Clone(root), 0xFF))})
			return nil, nil
		})
		if err != nil {
			t.Errorf("clear the test's keys: %v", err)
		}
	})
	return root
}

// TestConformance runs the store contract's conformance suite on a Layer
// over the cluster, each test under a root prefix of its own.
func TestConformance(t *testing.T) {
	openOrSkip(t)
	storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store {
		e := openOrSkip(t)
		l, err := fdblayer.Open(e, fdblayer.Config{RootPrefix: testRoot(t, e), Clock: clk, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	})
}

// TestEngine checks what the Layer relies on from the engine: FoundationDB's
// limits, Distributed, atomic commits, reads that tell absent from empty,
// bounded range reads, GetRanges that agree with GetRange, and no
// transactions after Close.
func TestEngine(t *testing.T) {
	e := openOrSkip(t)
	root := testRoot(t, e)
	key := func(s string) []byte { return append(bytes.Clone(root), s...) }
	ctx := t.Context()
	if e.Limits() != kv.FDBLimits() || !e.Distributed() {
		t.Fatalf("Limits %+v, Distributed %v; want FoundationDB's limits, distributed", e.Limits(), e.Distributed())
	}

	txn, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "c", "d"} {
		txn.Set(key(k), []byte(k+k))
	}
	txn.Set(key("b"), []byte{})
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	txn.Close()

	rt, err := e.BeginRead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	vals, err := rt.GetMany(nil, [][]byte{key("a"), key("b"), key("missing")})
	if err != nil || string(vals[0]) != "aa" || vals[1] == nil || len(vals[1]) != 0 || vals[2] != nil {
		t.Fatalf("GetMany = %q, %v; want aa, empty, absent", vals, err)
	}
	rows, err := rt.GetRange(nil, key("a"), key("z"), 2, 0)
	if err != nil || len(rows) != 2 || string(rows[1].Key) != string(key("b")) {
		t.Fatalf("GetRange with limit 2 = %q, %v", rows, err)
	}
	// A byte budget stops at the first row past it, which is returned.
	rows, err = rt.GetRange(nil, key("a"), key("z"), 10, len(key("a"))+2)
	if err != nil || len(rows) != 2 {
		t.Fatalf("GetRange with a byte budget = %q, %v; want 2 rows", rows, err)
	}
	reads := []kv.RangeRead{{Begin: key("a"), End: key("c"), Limit: 10}, {Begin: key("c"), End: key("z"), Limit: 1}}
	got, err := rt.(kv.RangesReader).GetRanges(reads)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reads {
		want, err := rt.GetRange(nil, r.Begin, r.End, r.Limit, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got[i]) != len(want) {
			t.Fatalf("GetRanges[%d] = %q, GetRange = %q", i, got[i], want)
		}
		for j := range want {
			if !bytes.Equal(got[i][j].Key, want[j].Key) || !bytes.Equal(got[i][j].Value, want[j].Value) {
				t.Fatalf("GetRanges[%d] = %q, GetRange = %q", i, got[i], want)
			}
		}
	}
	if n, err := e.EstimateRangeSize(ctx, key(""), key("z")); err != nil || n < 0 {
		t.Fatalf("EstimateRangeSize = %d, %v", n, err)
	}

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Begin(ctx); !errors.Is(err, kv.ErrClosed) {
		t.Fatalf("Begin after Close: %v, want kv.ErrClosed", err)
	}
	if err := e.Close(); !errors.Is(err, kv.ErrClosed) {
		t.Fatalf("second Close: %v, want kv.ErrClosed", err)
	}
}

// TestCommitErrors: the commit errors after which FoundationDB may still
// commit wrap store.ErrUnknownResult; the others do not, and every one
// keeps its fdb.Error for OnError.
func TestCommitErrors(t *testing.T) {
	for _, tc := range []struct {
		code    int
		unknown bool
	}{
		{fdbcode.NotCommitted, false},
		{fdbcode.TransactionTooOld, false},
		{fdbcode.CommitUnknownResult, true},
		{fdbcode.TransactionCancelled, true},
		{fdbcode.TransactionTimedOut, true},
		{fdbcode.ClusterVersionChanged, true},
	} {
		err := fdbengine.CommitError(fdb.Error{Code: tc.code})
		if got := errors.Is(err, store.ErrUnknownResult); got != tc.unknown {
			t.Errorf("code %d: wraps ErrUnknownResult %v, want %v", tc.code, got, tc.unknown)
		}
		var fe fdb.Error
		if !errors.As(err, &fe) || fe.Code != tc.code {
			t.Errorf("code %d: fdb.Error lost: %v", tc.code, err)
		}
	}
}

// TestAPIVersionOnce: selecting the API version again, here or through
// the binding, is accepted.
func TestAPIVersionOnce(t *testing.T) {
	if err := fdbengine.SelectAPIVersion(); err != nil {
		t.Fatal(err)
	}
	if err := fdbengine.SelectAPIVersion(); err != nil {
		t.Fatal(err)
	}
	if err := fdb.APIVersion(fdbengine.APIVersion); err != nil {
		t.Fatalf("the binding refused the same version again: %v", err)
	}
}

// TestContextDeadlineEndsTransaction: a transaction whose context's
// deadline passes fails (timed out or cancelled) rather than running on.
func TestContextDeadlineEndsTransaction(t *testing.T) {
	e := openOrSkip(t)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	txn, err := e.BeginRead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	<-ctx.Done()
	time.Sleep(20 * time.Millisecond)
	_, err = txn.GetMany(nil, [][]byte{[]byte("\x02mkitfdb-test\x00probe")})
	var fe fdb.Error
	if !errors.As(err, &fe) || (fe.Code != fdbcode.TransactionTimedOut && fe.Code != fdbcode.TransactionCancelled) {
		t.Fatalf("read after the deadline: %v, want FoundationDB error 1031 or 1025", err)
	}
	if err := txn.OnError(err); err == nil {
		t.Fatal("OnError retries a transaction whose context ended")
	}
}
