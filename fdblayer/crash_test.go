package fdblayer_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// crashChildEnv names the bbolt file a child process of
// TestGroupCommitSurvivesKill commits to.
const crashChildEnv = "FDBLAYER_CRASH_CHILD"

// crashWorkers commit side by side in the child, so that their calls
// meet in group commits.
const crashWorkers = 16

// crashCall is the n-th call of worker w: an Apply of a guarded batch to
// the worker's partition, or, every third call, a Commit of batches to
// two partitions; every fifth call carries a guard that fails (the key it
// requires is never written), so that failed batches share groups with
// committed ones.
func crashCall(ctx context.Context, l *Layer, w, n int) (store.CommitOutcome, error) {
	id := fmt.Sprintf("w%02d-%06d", w, n)
	b := func() *store.Batch {
		b := store.NewBatch().Require(store.Absent(store.Key(id))).Put(store.Key(id), store.Value(id))
		if n%5 == 4 {
			b.Require(store.Equals(store.Key("never"), store.Value("x")))
		}
		return b
	}
	p := storetest.Partition{Name: fmt.Sprintf("crash-%02d", w)}
	if n%3 != 2 {
		out, err := l.Apply(ctx, p, b())
		return store.CommitOutcome{BatchOutcome: out}, err
	}
	return l.Commit(ctx, []store.PartitionBatch{
		{Partition: p, Batch: store.NewBatch().Put(store.Key(id+"/c"), store.Value(id))},
		{Partition: storetest.Partition{Name: fmt.Sprintf("crash-shared-%02d", w)}, Batch: b()},
	})
}

// crashKeys are the rows call n of worker w writes when it commits.
func crashKeys(w, n int) map[store.Partition]store.Key {
	id := fmt.Sprintf("w%02d-%06d", w, n)
	p := storetest.Partition{Name: fmt.Sprintf("crash-%02d", w)}
	if n%3 != 2 {
		return map[store.Partition]store.Key{p: store.Key(id)}
	}
	return map[store.Partition]store.Key{p: store.Key(id + "/c"), storetest.Partition{Name: fmt.Sprintf("crash-shared-%02d", w)}: store.Key(id)}
}

// runCrashChild commits calls from crashWorkers goroutines to the bbolt
// file at path, printing "ok w n" once call n of worker w committed and
// "failed w n" once it reported a failed guard, until it is killed (or a
// minute passes).
func runCrashChild(path string) {
	e, err := boltengine.Open(path, boltengine.Config{})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	l, err := Open(e, Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println("open layer:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	report := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		// One write per line: it reaches the parent even if the process
		// is killed right after.
		_, _ = os.Stdout.WriteString(line + "\n")
	}
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				out, err := crashCall(ctx, l, w, n)
				switch {
				case err != nil:
					report(fmt.Sprintf("error %d %d %v", w, n, err))
				case out.Committed():
					report(fmt.Sprintf("ok %d %d", w, n))
				default:
					report(fmt.Sprintf("failed %d %d", w, n))
				}
			}
		})
	}
	wg.Wait()
	os.Exit(0)
}

// TestGroupCommitSurvivesKill runs a child process that commits batches
// from 16 goroutines to a bbolt file (their calls meeting in group
// commits), kills it with SIGKILL once it has reported 600 calls, and
// reopens the file: every batch the child reported committed is there,
// every one it reported failed (a guard) is not.
func TestGroupCommitSurvivesKill(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		runCrashChild(path)
		return
	}
	if testing.Short() {
		t.Skip("runs a child process")
	}
	path := filepath.Join(t.TempDir(), "crash.bbolt")
	cmd := exec.Command(os.Args[0], "-test.run=^TestGroupCommitSurvivesKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type call struct{ w, n int }
	committed, failed := map[call]bool{}, map[call]bool{}
	sc := bufio.NewScanner(stdout)
	reported := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			t.Fatalf("child: %s", sc.Text())
		}
		w, err1 := strconv.Atoi(f[1])
		n, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("child: %s", sc.Text())
		}
		switch f[0] {
		case "ok":
			committed[call{w, n}] = true
		case "failed":
			failed[call{w, n}] = true
		default:
			t.Fatalf("child: %s", sc.Text())
		}
		if reported++; reported == 600 {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	if reported < 600 {
		t.Fatalf("the child reported %d calls and ended (%v)", reported, err)
	}
	if len(failed) == 0 || len(committed) == 0 {
		t.Fatalf("the child reported %d committed and %d failed calls: the test needs both", len(committed), len(failed))
	}
	e, err := boltengine.Open(path, boltengine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l := openLayer(t, e)
	for c := range committed {
		for p, k := range crashKeys(c.w, c.n) {
			if v, ok, err := l.Get(t.Context(), p, k); err != nil || !ok {
				t.Fatalf("call %d of worker %d was reported committed; %s of %v after the kill: %q, %v, %v", c.n, c.w, k, p, v, ok, err)
			}
		}
	}
	for c := range failed {
		for p, k := range crashKeys(c.w, c.n) {
			if v, ok, err := l.Get(t.Context(), p, k); err != nil || ok {
				t.Fatalf("call %d of worker %d was reported failed; %s of %v after the kill: %q, %v, %v", c.n, c.w, k, p, v, ok, err)
			}
		}
	}
	t.Logf("after the kill: %d calls reported committed are there, %d reported failed are not", len(committed), len(failed))
}
