//go:build fdb

package fdblayer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"os"
	"testing"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/fdbcode"
	"github.com/mkit-dev/mkitfdb/store"
)

func init() {
	engineCases = append(engineCases, engineCase{name: "fdb", open: openTestFDB})
}

// openTestFDB opens the cluster FDB_CLUSTER_FILE names, skipping the test
// when none is set or it does not answer. Each test gets its own root
// prefix, cleared when the test ends.
func openTestFDB(t *testing.T) (kv.Engine, []Option) {
	t.Helper()
	e := openFDBOrSkip(t)
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	// The tuple ("mkitfdb-test", "<16 hex digits>").
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
	return e, []Option{WithRootPrefix(root)}
}

func openFDBOrSkip(t *testing.T) *FDBEngine {
	t.Helper()
	cf := os.Getenv("FDB_CLUSTER_FILE")
	if cf == "" {
		t.Skip("FoundationDB tests need a cluster: set FDB_CLUSTER_FILE to its cluster file, " +
			"or run scripts/test-fdb.sh (make test-fdb), which starts a throwaway fdbserver and runs go test -tags fdb ./...")
	}
	e, err := OpenFDBEngine(cf)
	if err != nil {
		t.Fatalf("OpenFDBEngine(%q): %v", cf, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := e.Probe(ctx); err != nil {
		t.Skipf("the FoundationDB cluster of %s does not answer within 5s (%v); run scripts/test-fdb.sh for a throwaway one", cf, err)
	}
	return e
}

// TestFDBCommitErrors: the commit errors after which FoundationDB may still
// commit wrap store.ErrUnknownResult; the others do not, and every one
// keeps its fdb.Error for OnError.
func TestFDBCommitErrors(t *testing.T) {
	for _, tc := range []struct {
		code    int
		unknown bool
	}{
		{1020, false}, // not_committed
		{1007, false}, // transaction_too_old
		{1021, true},  // commit_unknown_result
		{1025, true},  // transaction_cancelled
		{1031, true},  // transaction_timed_out
		{1039, true},  // cluster_version_changed
	} {
		err := CommitError(fdb.Error{Code: tc.code})
		if got := errors.Is(err, store.ErrUnknownResult); got != tc.unknown {
			t.Errorf("code %d: wraps ErrUnknownResult %v, want %v", tc.code, got, tc.unknown)
		}
		var fe fdb.Error
		if !errors.As(err, &fe) || fe.Code != tc.code {
			t.Errorf("code %d: fdb.Error lost: %v", tc.code, err)
		}
	}
}

// TestFDBAPIVersionOnce: selecting the API version again, here or through
// the binding, is accepted.
func TestFDBAPIVersionOnce(t *testing.T) {
	if err := SelectAPIVersion(); err != nil {
		t.Fatal(err)
	}
	if err := SelectAPIVersion(); err != nil {
		t.Fatal(err)
	}
	if err := fdb.APIVersion(FDBAPIVersion); err != nil {
		t.Fatalf("the binding refused the same version again: %v", err)
	}
}

// TestFDBContextDeadlineEndsTransaction: a transaction whose context's
// deadline passes fails (timed out or cancelled) rather than running on.
func TestFDBContextDeadlineEndsTransaction(t *testing.T) {
	e := openFDBOrSkip(t)
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
