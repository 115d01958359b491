package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// putProcess writes a process row into l's evolution partition, as a
// gate of another process would have: name, live until expires, knowing
// known.
func putProcess(t *testing.T, l *fdblayer.Layer, name, binary string, expires time.Time, known ...gen.NamespaceFormat) {
	t.Helper()
	k, err := gen.AppendProcessKey(nil, name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := gen.EncodeProcessV1(gen.ProcessV1{Binary: binary, StartedAtMs: uint64(t0.Add(-10 * time.Minute).UnixMilli()),
		ExpiresAtMs: uint64(expires.UnixMilli()), Known: known})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := l.Apply(context.Background(), evolve.Partition, store.NewBatch().Put(k, v)); err != nil || !out.Committed() {
		t.Fatalf("put process %s: %v %v", name, out, err)
	}
}

// formatsStore writes a bbolt store for the formats views: new (at the
// formats this binary knows, recorded by process "svc-a:1" an hour before
// t0) when created, or written before formats existed (every namespace at
// 1) when not; with the rows of three other processes: one live that knows
// every format, one live that knows mkit format 1 only, one expired; and
// a relay row of a newer version than this binary reads. It returns the
// file's path, closed.
func formatsStore(t *testing.T, created bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "formats.db")
	e, err := boltengine.Open(path, boltengine.Config{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	gate := evolve.GateConfig{Process: "svc-a:1", Binary: "orders-svc (fixture)", Clock: clock.NewManual(t0.Add(-time.Hour))}
	if !created {
		gate = evolve.GateConfig{ReadOnly: true}
	}
	l, err := fdblayer.Open(e, fdblayer.Config{Logger: slog.New(slog.DiscardHandler), Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	putProcess(t, l, "svc-b:2", "orders-svc (fixture)", t0.Add(30*time.Second),
		gen.NamespaceFormat{Namespace: "mkit", Format: 2}, gen.NamespaceFormat{Namespace: "orders", Format: 1})
	putProcess(t, l, "old-c:3", "orders-svc (older)", t0.Add(20*time.Second),
		gen.NamespaceFormat{Namespace: "mkit", Format: 1}, gen.NamespaceFormat{Namespace: "orders", Format: 1})
	putProcess(t, l, "gone-d:4", "orders-svc (fixture)", t0.Add(-5*time.Minute), gen.NamespaceFormat{Namespace: "mkit", Format: 2})
	row := store.Value{gen.VersionRelayV2 + 1, 0x01, 0x02, 0x03}
	if out, err := l.Apply(context.Background(), ada, store.NewBatch().Put(gen.AppendRelayKey(nil, 1), row)); err != nil || !out.Committed() {
		t.Fatalf("put the newer row: %v %v", out, err)
	}
	return path
}

// TestGoldenFormats: the formats view of a new store, and how the views
// show a row of a newer version (get, scan, partitions), in text and
// JSON, are what testdata holds.
func TestGoldenFormats(t *testing.T) {
	db := formatsStore(t, true)
	for _, v := range []struct {
		name string
		args []string
	}{
		{"formats", []string{"formats"}},
		{"get-newer", []string{"get", "-partition", adaText, "-key", "(16, 1)"}},
		{"scan-newer", []string{"scan", "-partition", adaText, "-class", "RelayKey"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			args := append([]string{v.args[0], "-db", db}, v.args[1:]...)
			code, out, errOut := run(t, t0, args...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, v.name+".txt", out)
			code, js, errOut := run(t, t0, append(args, "-json")...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("-json: exit %d, stderr %q", code, errOut)
			}
			golden(t, v.name+".json", indent(t, js))
		})
	}
	_, out, _ := run(t, t0, "partitions", "-db", db)
	want := "newer RelayKey (16, 1) (rev 5c42fbeb8424c28e): RelayKey value version 3 (this binary: 1-2; store format mkit=2)"
	if !strings.Contains(out, want) || strings.Contains(out, "corrupt RelayKey") {
		t.Errorf("partitions shows the newer row not as %q:\n%s", want, out)
	}
}

// indent is js indented, as the golden views' JSON is; it fails t when
// js does not parse.
func indent(t *testing.T, js string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("-json does not parse: %v\n%s", err, js)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(js), "", "  "); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestFormatsRaise: on a store written before formats, a raise of mkit
// to 2 is refused while a live process does not know 2, naming it,
// writing nothing; forced past it, it is done and recorded (who, when,
// why, the process forced past), and the formats view shows it. Raises
// this binary cannot vouch for, or that skip or repeat a format, are
// refused.
func TestFormatsRaise(t *testing.T) {
	db := formatsStore(t, false)
	raise := func(extra ...string) (int, string, string) {
		return run(t, t0, append([]string{"formats", "raise", "-db", db, "-namespace", "mkit", "-to", "2", "-by", "oncall", "-reason", "retry policies' state", "-yes"}, extra...)...)
	}
	before := statusOf(t, db)
	code, out, errOut := raise()
	if code != ExitFailed || !strings.Contains(errOut, "old-c:3 (knows 1)") || strings.Contains(errOut, "svc-b:2") || strings.Contains(errOut, "gone-d:4") {
		t.Fatalf("raise past a live process that does not know 2: exit %d\n%s%s", code, out, errOut)
	}
	if after := statusOf(t, db); after != before {
		t.Fatalf("a refused raise wrote: %s, was %s", after, before)
	}

	code, out, errOut = raise("-force")
	if code != ExitOK || errOut != "" {
		t.Fatalf("forced raise: exit %d\n%s%s", code, out, errOut)
	}
	golden(t, "formats-raise.txt", strings.ReplaceAll(out, db, "FIXTURE"))
	_, out, _ = run(t, t0, "formats", "-db", db)
	golden(t, "formats-raised.txt", out)

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-force"}, ExitFailed, "is at format 2: a raise goes one format at a time, never down (to 3 next)"},
		{[]string{"-to", "3"}, ExitUsage, "knows formats 1-2 of namespace \"mkit\": raise it with a binary that knows 3"},
		{[]string{"-namespace", "orders"}, ExitFailed, "live processes do not know format 2: old-c:3 (knows 1), svc-b:2 (knows 1)"},
		{[]string{"-namespace", "orders", "-to", "3"}, ExitUsage, "knows formats 1-2 of namespace \"orders\": raise it with a binary that knows 3"},
		{[]string{"-namespace", "elsewhere"}, ExitUsage, "does not link namespace \"elsewhere\""},
		{[]string{"-reason", " "}, ExitUsage, "-reason is required"},
	} {
		code, out, errOut := raise(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("raise %v: exit %d, want %d and %q in one line\n%s%s", tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
	if after := statusOf(t, db); !strings.Contains(after, "mkit=2") {
		t.Fatalf("after the raise the store is %s", after)
	}
}

// statusOf is db's formats as a line, read through the formats view.
func statusOf(t *testing.T, db string) string {
	t.Helper()
	_, js, errOut := run(t, t0, "formats", "-db", db, "-json")
	var rep FormatsReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("%v: %s%s", err, js, errOut)
	}
	var parts []string
	for _, n := range rep.Namespaces {
		parts = append(parts, fmt.Sprintf("%s=%d", n.Namespace, n.Store))
		for _, s := range n.History {
			parts = append(parts, s.By)
		}
	}
	return strings.Join(parts, " ")
}
