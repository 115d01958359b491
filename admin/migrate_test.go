package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// upperNote is the test's migration, linked through Config.Migrations:
// every order's note in capitals.
func upperNote(l *fdblayer.Layer, log *slog.Logger) (evolve.Migration, error) {
	start, end := ordersgen.ClassRange(ordersgen.TagOrderKey)
	return evolve.KeyClassMigration(l, l, evolve.KeyClassConfig{
		Name: "orders.upper-note", Namespace: ordersgen.SchemaNamespace, Start: start, End: end, PageRows: 2, Logger: log,
		Rewrite: func(k store.Key, v store.Value, _ uint32) (store.Key, store.Value, error) {
			o, err := ordersgen.DecodeOrderV1(v)
			if err != nil {
				return nil, nil, err
			}
			o.Note = strings.ToUpper(o.Note)
			b, err := ordersgen.EncodeOrderV1(o)
			return k, b, err
		},
	})
}

var bob = ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID("bob")}

// migrationFixture writes a store holding orders of two customers (one
// order of bob's corrupt), and checkpoints: a migration that failed, one a
// runner holds, and one done that this command does not link.
func migrationFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "migrations.db")
	l := openBolt(t, path)
	defer l.Close()
	for _, c := range []struct {
		p      ordersgen.CustomerShard
		orders int
	}{{ada, 5}, {bob, 3}} {
		b := store.NewBatch()
		for n := 1; n <= c.orders; n++ {
			k, err := ordersgen.AppendOrderKey(nil, c.p.Customer, uint64(n))
			if err != nil {
				t.Fatal(err)
			}
			v, err := ordersgen.EncodeOrderV1(ordersgen.OrderV1{Status: ordersgen.StatusOpen, Region: 1, Note: "teapot"})
			if err != nil {
				t.Fatal(err)
			}
			b.Put(k, v)
		}
		if c.p == bob {
			k, _ := ordersgen.AppendOrderKey(nil, c.p.Customer, 9)
			b.Put(k, []byte{0x01, 0x09})
		}
		if out, err := l.Apply(context.Background(), c.p, b); err != nil || !out.Committed() {
			t.Fatalf("%v %v", out, err)
		}
	}
	ms := func(t time.Time) uint64 { return uint64(t.UnixMilli()) }
	adaID, _ := ada.AppendTuple(nil)
	for name, v := range map[string]gen.MigrationV1{
		"test.failed": {Cursor: []byte{1}, Partition: adaID, Rows: 30, Rewritten: 12, Pages: 3, Partitions: 1,
			StartedAtMs: ms(t0.Add(-time.Hour)), UpdatedAtMs: ms(t0.Add(-50 * time.Minute)), Owner: "ops@build-7:4242",
			LastError: "evolve: migration \"test.failed\": page after 3: store unavailable"},
		"test.running": {Cursor: []byte{1}, Partition: adaID, Rows: 120, Rewritten: 100, Left: 2, Conflicts: 1, Pages: 12, Partitions: 4,
			StartedAtMs: ms(t0.Add(-time.Minute)), UpdatedAtMs: ms(t0.Add(-5 * time.Second)), Owner: "worker-7:311",
			LeaseUntilMs: ms(t0.Add(25 * time.Second))},
		"old.done": {Rows: 900, Rewritten: 400, Pages: 40, Partitions: 12,
			StartedAtMs: ms(t0.Add(-48 * time.Hour)), UpdatedAtMs: ms(t0.Add(-47 * time.Hour)), DoneAtMs: ms(t0.Add(-47 * time.Hour)), Owner: "ops@build-7:4000"},
	} {
		k, err := gen.AppendMigrationKey(nil, name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := gen.EncodeMigrationV1(v)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := l.Apply(context.Background(), evolve.Partition, store.NewBatch().Put(k, b)); err != nil || !out.Committed() {
			t.Fatalf("%v %v", out, err)
		}
	}
	return path
}

// runMigrations runs the command with upperNote linked.
func runMigrations(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := NewCommand(Config{Name: "mkitfdb", Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr,
		Clock: clock.NewManual(t0), Migrations: []MigrationFunc{upperNote}})
	code := c.Run(context.Background(), args)
	return code, stdout.String(), stderr.String()
}

// TestGoldenMigrations: the migrations view, text and JSON, of every
// state: not started (linked), running, failed, done (not linked).
func TestGoldenMigrations(t *testing.T) {
	db := migrationFixture(t)
	code, out, errOut := runMigrations(t, "", "migrations", "-db", db)
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	golden(t, "migrations.txt", out)
	code, js, errOut := runMigrations(t, "", "migrations", "-db", db, "-json")
	if code != ExitOK || errOut != "" {
		t.Fatalf("-json: exit %d, stderr %q", code, errOut)
	}
	var v struct {
		Migrations []MigrationRow `json:"migrations"`
	}
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("-json does not parse: %v\n%s", err, js)
	}
	states := map[string]string{}
	for _, r := range v.Migrations {
		states[r.Name] = r.State
	}
	want := map[string]string{"mkit.due-index": "not started", "orders.upper-note": "not started",
		"test.failed": "failed", "test.running": "running", "old.done": "done"}
	if len(states) != len(want) {
		t.Errorf("states %v, want %v", states, want)
	}
	for k, s := range want {
		if states[k] != s {
			t.Errorf("%s: state %q, want %q", k, states[k], s)
		}
	}
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, []byte(js), "", "  ")
	golden(t, "migrations.json", pretty.String())
}

// migrate runs a linked migration to the end: every order's note in
// capitals, the corrupt order left as it was and logged on stderr, the
// checkpoint done; run again it has nothing to do, -again runs it anew.
func TestMigrateRunsALinkedMigration(t *testing.T) {
	db := migrationFixture(t)
	code, out, errOut := runMigrations(t, "", "migrate", "-db", db, "-yes", "-who", "ada", "orders.upper-note")
	if code != ExitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	golden(t, "migrate.txt", strings.ReplaceAll(out, db, "FIXTURE"))
	if !strings.Contains(errOut, "evolve: migration left a row as it was") || !strings.Contains(errOut, "bob") {
		t.Errorf("stderr does not log the corrupt order left:\n%s", errOut)
	}
	l := openBolt(t, db)
	start, end := ordersgen.ClassRange(ordersgen.TagOrderKey)
	for _, p := range []ordersgen.CustomerShard{ada, bob} {
		page, err := l.Scan(context.Background(), p, start, end, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Entries {
			o, err := ordersgen.DecodeOrderV1(r.Value)
			if err != nil {
				continue // bob's corrupt order
			}
			if o.Note != "TEAPOT" {
				t.Errorf("%v %x: note %q", p, r.Key, o.Note)
			}
		}
	}
	cp, ok, err := evolve.Progress(context.Background(), l, "orders.upper-note")
	if err != nil || !ok || !cp.IsDone() || cp.Rewritten != 8 || cp.Left != 1 || !strings.HasPrefix(cp.Owner, "ada@") {
		t.Errorf("checkpoint %+v %v %v: want done, 8 rewritten, 1 left, owned by ada@...", cp, ok, err)
	}
	_ = l.Close()

	code, out, _ = runMigrations(t, "", "migrate", "-db", db, "-yes", "orders.upper-note")
	if code != ExitOK || !strings.Contains(out, "nothing to do (-again runs it from the start)") {
		t.Errorf("a done migration: exit %d\n%s", code, out)
	}
	code, out, _ = runMigrations(t, "", "migrate", "-db", db, "-yes", "-again", "orders.upper-note")
	if code != ExitOK || !strings.Contains(out, "runs again from the start") || !strings.Contains(out, "0 rewritten") {
		t.Errorf("-again: exit %d\n%s", code, out)
	}
}

// What migrate refuses: a migration another runner holds (nothing
// written), one not linked, no name or two, and a script without -yes;
// at a terminal it asks.
func TestMigrateRefuses(t *testing.T) {
	db := migrationFixture(t)
	l := openBolt(t, db)
	held, _ := gen.EncodeMigrationV1(gen.MigrationV1{Cursor: []byte{1}, Pages: 2, Owner: "worker-7:311", LeaseUntilMs: uint64(t0.Add(25 * time.Second).UnixMilli())})
	key, _ := gen.AppendMigrationKey(nil, "orders.upper-note")
	if out, err := l.Apply(context.Background(), evolve.Partition, store.NewBatch().Put(key, held)); err != nil || !out.Committed() {
		t.Fatalf("%v %v", out, err)
	}
	_ = l.Close()
	before := snapshot(t, db)
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		stder string
	}{
		{"held", []string{"migrate", "-db", db, "-yes", "orders.upper-note"}, ExitFailed, "orders.upper-note is running: worker-7:311 holds it until 2026-03-01T12:00:25.000Z (in 25s); nothing written"},
		{"not linked", []string{"migrate", "-db", db, "-yes", "old.done"}, ExitUsage, `no migration "old.done" is linked into mkitfdb (it links mkit.due-index, orders.upper-note)`},
		{"no name", []string{"migrate", "-db", db, "-yes"}, ExitUsage, "migrate: name one NAME after the flags"},
		{"two names", []string{"migrate", "-db", db, "-yes", "a", "b"}, ExitUsage, "migrate: name one NAME after the flags"},
		{"no -yes", []string{"migrate", "-db", db, "orders.upper-note"}, ExitUsage, "refusing to write without -yes"},
	} {
		code, _, errOut := runMigrations(t, "", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.stder) {
			t.Errorf("%s: exit %d %q, want %d and %q", tc.name, code, errOut, tc.code, tc.stder)
		}
	}
	if snapshot(t, db) != before {
		t.Error("a refused migrate wrote")
	}
	db = migrationFixture(t)
	before = snapshot(t, db)
	for _, answer := range []string{"no\n", "yes\n"} {
		var stdout, stderr bytes.Buffer
		c := NewCommand(Config{Stdin: strings.NewReader(answer), Stdout: &stdout, Stderr: &stderr, Clock: clock.NewManual(t0),
			Migrations: []MigrationFunc{upperNote}})
		c.forceTerminal = true
		code := c.Run(context.Background(), []string{"migrate", "-db", db, "orders.upper-note"})
		if !strings.Contains(stdout.String(), "type yes to run it: ") {
			t.Errorf("answer %q: no question asked:\n%s", answer, stdout.String())
		}
		switch {
		case answer == "no\n" && (code != ExitFailed || snapshot(t, db) != before):
			t.Errorf("answer no: exit %d, or it wrote", code)
		case answer == "yes\n" && code != ExitOK:
			t.Errorf("answer yes: exit %d %s", code, stderr.String())
		}
	}
}
