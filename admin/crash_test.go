package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// errKilled is every write of a scheduler that is killed once it has
// claimed its partitions.
var errKilled = errors.New("killed")

// dyingStore is the store as a scheduler killed right after its claims
// sees it: its claims (transactions) commit, every batch after them
// (the fire's outcomes, the release) is lost, and its due listing shows
// only the partitions in only, so that each test scheduler claims its
// own.
type dyingStore struct {
	*fdblayer.Layer
	only map[string]bool
}

func (d dyingStore) Apply(context.Context, store.Partition, *store.Batch) (store.BatchOutcome, error) {
	return store.BatchOutcome{}, errKilled
}

func (d dyingStore) ScanDue(ctx context.Context, q store.DueQuery) ([]store.DueEntry, error) {
	page, err := d.Layer.ScanDue(ctx, q)
	kept := page[:0]
	for _, e := range page {
		if d.only[string(e.Partition)] {
			kept = append(kept, e)
		}
	}
	return kept, err
}

// shipAll fires the fixture service's ship timers (its outcomes are lost
// with the scheduler).
type shipAll struct{}

func (shipAll) Kind() timers.Kind { return kindShip }

func (shipAll) Fire(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
	return timers.Done{}, nil
}

// killScheduler runs one tick of a scheduler named owner at the time at,
// with the default lease duration, over the partitions ps only, and kills
// it right after its claims: it leaves them parked under its lease, and
// its membership live until its lease duration has passed.
func killScheduler(t *testing.T, l *fdblayer.Layer, owner string, at time.Time, ps ...store.Partition) {
	t.Helper()
	only := map[string]bool{}
	for _, p := range ps {
		id, _ := p.AppendTuple(nil)
		only[string(id)] = true
	}
	reg, err := timers.NewRegistry(shipAll{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := timers.NewScheduler(timers.SchedulerConfig{Store: dyingStore{Layer: l, only: only}, Registry: reg, Owner: owner,
		Workers: 1, Clock: clock.NewManual(at), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := s.Tick(context.Background())
	if rep.Claimed != len(ps) {
		t.Fatalf("%s claimed %d partitions, want %d: %+v", owner, rep.Claimed, len(ps), rep)
	}
}

// region3 is the crash fixture's partition of long values.
var region3 = ordersgen.RegionShard{Region: 3}

// crashFixture is deadFixture after two schedulers were killed: "sched-b",
// 30 s before the fixture's now, holding the unlinked partition ("elsewhere",
// 1, "x"), its lease expired 20 s ago; "sched-a", 5 s before now, holding
// ("orders", 2, "ada"), its lease live for 5 s more; both partitions parked,
// their due timers due. Region 3 holds rows of 256 zero bytes, as the
// demo's: a relay row whose put carries them, a row of no known class
// holding them, and a quarantined relay row carrying them.
func crashFixture(t *testing.T) string {
	t.Helper()
	path := deadFixture(t)
	l := openBolt(t, path)
	// sched-a first, so that sched-b finds its membership live and keeps
	// it (a scheduler deletes the expired ones it finds).
	killScheduler(t, l, "sched-a", t0.Add(-5*time.Second), ada)
	killScheduler(t, l, "sched-b", t0.Add(-30*time.Second), foreign)

	ctx := context.Background()
	zeros := make([]byte, 256)
	obs, err := outbox.Read(ctx, store.ReaderOf(l, region3))
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.NewBuilder(l, t0.Add(-time.Minute), obs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		puts := []gen.RelayPut{{Key: orderKey(t, uint64(20+i)), Value: zeros}}
		if _, err := ob.Relay(ctx, region1, puts, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := store.NewBatch()
	if err := ob.Finish(b); err != nil {
		t.Fatal(err)
	}
	b.Put(tuple.AppendString(tuple.AppendUint(nil, 200), "blob"), zeros)
	if out, err := l.Apply(ctx, region3, b); err != nil || !out.Committed() {
		t.Fatalf("region 3: %v %v", out, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, t0, "quarantine", "-db", path, "-partition", region3Text, "-key", "(16, 1)", "-reason", "blob", "-who", "ops", "-yes")
	if code != ExitOK {
		t.Fatalf("quarantine in the fixture: exit %d %s", code, errOut)
	}
	return path
}

const region3Text = `("orders", 1, 3)`

// crashViews are the golden cases of the crash fixture.
var crashViews = []struct {
	name string
	args []string
}{
	{"partitions", []string{"partitions"}},
	{"timers", []string{"timers"}},
	{"timers-due", []string{"timers", "-due"}},
	{"timers-leased", []string{"timers", "-state", "leased"}},
	{"lag", []string{"lag"}},
	{"schedulers", []string{"schedulers"}},
	{"scan-members", []string{"scan", "-partition", `(nil, "mkitfdb", "schedulers")`}},
	{"scan-highwater", []string{"scan", "-partition", region1Text, "-class", "RelayHighWaterKey"}},
	{"scan-long", []string{"scan", "-partition", region3Text}},
	{"get-long", []string{"get", "-partition", region3Text, "-key", `(200, "blob")`}},
	{"get-long-full", []string{"get", "-partition", region3Text, "-key", `(200, "blob")`, "-full"}},
	{"quarantined", []string{"quarantined"}},
}

// TestGoldenCrashViews: every view of a store whose schedulers were killed
// holding leases, in text and JSON, is what testdata/crash-* holds.
func TestGoldenCrashViews(t *testing.T) {
	db := crashFixture(t)
	for _, v := range crashViews {
		t.Run(v.name, func(t *testing.T) {
			args := append([]string{v.args[0], "-db", db}, v.args[1:]...)
			code, out, errOut := run(t, t0, args...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, "crash-"+v.name+".txt", out)
			if strings.HasSuffix(v.name, "-full") {
				return
			}
			code, js, errOut := run(t, t0, append(args, "-json")...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("-json: exit %d, stderr %q", code, errOut)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, []byte(js), "", "  "); err != nil {
				t.Fatalf("-json does not parse: %v\n%s", err, js)
			}
			golden(t, "crash-"+v.name+".json", pretty.String())
		})
	}
}

// TestCrashViewsTellTheTruth: after schedulers were killed holding leases,
// every text view shows the leases and why the due timers are not firing,
// and the other facts the views got wrong after a crash are right.
func TestCrashViewsTellTheTruth(t *testing.T) {
	db := crashFixture(t)
	view := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(t, t0, append([]string{args[0], "-db", db}, args[1:]...)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		return out
	}
	leasedA := `held by "sched-a" until 2026-03-01T12:00:05.000Z (in 5s)`
	expiredB := `held by "sched-b" until 2026-03-01T11:59:40.000Z (expired 20s ago)`

	// A killed scheduler's leases, in every text view, and why a due timer
	// is not firing.
	timersText := view("timers")
	for _, want := range [][]string{
		{adaText, `"ship/ada/1"`, "leased: " + leasedA},
		{idText(foreign), `"elsewhere"`, "leased: " + expiredB},
	} {
		if !containsLine(timersText, want) {
			t.Errorf("timers lacks a line with %q:\n%s", want, timersText)
		}
	}
	due := view("timers", "-due")
	if !containsLine(due, []string{adaText, `"ship/ada/1"`, "leased: " + leasedA}) ||
		!containsLine(due, []string{idText(foreign), `"elsewhere"`, "leased: " + expiredB}) || !strings.Contains(due, "\n3 timers\n") {
		t.Errorf("timers -due does not list the leased due timers:\n%s", due)
	}
	lag := view("lag")
	for _, want := range []string{"4 due now: 2 listed for the schedulers, 2 parked by a scheduler's claim",
		`"sched-a" holds 1 partition lease until 2026-03-01T12:00:05.000Z (in 5s)`, `"sched-b" holds 1 partition lease`, "1 of them expired",
		"not firing: " + expiredB} {
		if !strings.Contains(lag, want) {
			t.Errorf("lag lacks %q:\n%s", want, lag)
		}
	}
	parts := view("partitions")
	for _, want := range []string{"lease: " + leasedA, "lease: " + expiredB, "wake: parked"} {
		if !strings.Contains(parts, want) {
			t.Errorf("partitions lacks %q:\n%s", want, parts)
		}
	}
	if !containsLine(parts, []string{adaText, "parked"}) {
		t.Errorf("partitions does not show ada parked:\n%s", parts)
	}
	sched := view("schedulers")
	for _, want := range [][]string{{`"sched-a"`, "live until 2026-03-01T12:00:05.000Z"}, {`"sched-b"`, "expired 20s ago"}, {adaText, leasedA}} {
		if !containsLine(sched, want) {
			t.Errorf("schedulers lacks a line with %q:\n%s", want, sched)
		}
	}

	// A parked partition's wake time is no 1969 date.
	js := view("partitions", "-json")
	if strings.Contains(js, "1969") {
		t.Errorf("partitions -json shows a 1969 time:\n%s", js)
	}
	var pv struct {
		Partitions []PartitionReport `json:"partitions"`
		Unlinked   []Unlinked        `json:"unlinked"`
	}
	if err := json.Unmarshal([]byte(js), &pv); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pv.Partitions {
		switch p.Partition {
		case adaText:
			found = true
			if !p.Parked || p.Wake != nil || p.Lease == nil || p.Lease.Owner != "sched-a" || p.Lease.Expired {
				t.Errorf("ada: parked %v, wake %v, lease %+v: want parked, no wake time, sched-a's live lease", p.Parked, p.Wake, p.Lease)
			}
		case `(nil, "mkitfdb", "schedulers")`:
			if p.Kind != membersKind || len(p.Members) != 2 || p.Members[0].Owner != "sched-a" || !p.Members[0].Live || p.Members[1].Live {
				t.Errorf("the members partition: kind %q, members %+v", p.Kind, p.Members)
			}
		case region1Text:
			if p.DeadLetters.N != 3 {
				t.Errorf("region 1 counts %v dead letters, want 3", p.DeadLetters)
			}
		}
	}
	if !found {
		t.Errorf("partitions -json lacks ada")
	}

	// The library's own partition is linked, its rows decoded.
	for _, u := range pv.Unlinked {
		if strings.Contains(u.Prefix, "nil") {
			t.Errorf("the scheduler members partition is listed as not linked: %+v", u)
		}
	}
	members := view("scan", "-partition", `(nil, "mkitfdb", "schedulers")`)
	if !strings.Contains(members, `SchedulerLeaseV1{Owner: "sched-a", ExpiresAtMs: 1772366405000}`) {
		t.Errorf("the members' rows are not decoded:\n%s", members)
	}

	// Long values are shortened, with their length; -full and -json keep
	// them whole.
	nils := strings.Repeat("nil, ", 20)
	for _, args := range [][]string{
		{"scan", "-partition", region3Text},
		{"get", "-partition", region3Text, "-key", `(200, "blob")`},
		{"quarantined"},
	} {
		out := view(args...)
		if strings.Contains(out, nils) || !strings.Contains(out, "(256 bytes)") {
			t.Errorf("%v does not shorten the 256 zero bytes:\n%s", args, out)
		}
	}
	if full := view("get", "-partition", region3Text, "-key", `(200, "blob")`, "-full"); !strings.Contains(full, nils) {
		t.Errorf("get -full shortens the value:\n%s", full)
	}
	code, out, _ := run(t, t0, "quarantine", "-db", db, "-partition", region3Text, "-key", "(16, 2)", "-reason", "look", "-yes")
	if code != ExitOK || strings.Contains(out, nils) || !strings.Contains(out, "(256 bytes)") {
		t.Errorf("quarantine does not shorten the value it shows (exit %d):\n%s", code, out)
	}

	// Dead letters are counted by partitions and lag.
	if !containsLine(parts, []string{region1Text, "region"}) || !strings.Contains(parts, "dead letters: 3") {
		t.Errorf("partitions does not count region 1's dead letters:\n%s", parts)
	}
	if !strings.Contains(lag, "dead letters         3 in 1 partition") {
		t.Errorf("lag does not count the dead letters:\n%s", lag)
	}

	// A relay high-water key's source is a tuple.
	hw := view("scan", "-partition", region1Text, "-class", "RelayHighWaterKey")
	if !strings.Contains(hw, `RelayHighWaterKey{Source: ("orders", 2, "ada")}`) {
		t.Errorf("the high-water key's source is not shown as a tuple:\n%s", hw)
	}

	// rev is said to be a hash wherever it is shown.
	for _, args := range [][]string{{"help", "get"}, {"help", "quarantine"}, {"help", "restore"}, {"get", "-db", db, "-partition", region3Text, "-key", `(200, "blob")`}} {
		_, out, _ := run(t, t0, args...)
		if !strings.Contains(out, "hash") {
			t.Errorf("%v does not say rev is a hash:\n%s", args, out)
		}
	}
}

// TestREADMEShowsKindNamesAndStableOwners: the README's admin.Main names
// the service's timer kinds, and its Scheduler has a stable Owner.
func TestREADMEShowsKindNamesAndStableOwners(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"admin.Main(admin.Config{KindNames:", "timers.SchedulerConfig{Store: s, Registry: reg,\n\tOwner: host}"} {
		if !bytes.Contains(readme, []byte(want)) {
			t.Errorf("README.md lacks %q", want)
		}
	}
}
