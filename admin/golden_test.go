package admin

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// views are the golden cases: every view, in text and in JSON, on the
// fixture's store.
var views = []struct {
	name string
	args []string
}{
	{"partitions", []string{"partitions"}},
	{"timers", []string{"timers"}},
	{"timers-due", []string{"timers", "-due"}},
	{"lag", []string{"lag"}},
	{"get-corrupt", []string{"get", "-partition", `("orders", 2, "ada")`, "-key", "(16, 2)"}},
	{"get-order", []string{"get", "-partition", `("orders", 2, "ada")`, "-key", `(100, "ada", 9)`}},
	{"scan", []string{"scan", "-partition", `("orders", 2, "ada")`}},
	{"scan-relay", []string{"scan", "-partition", `("orders", 2, "ada")`, "-class", "RelayKey"}},
	{"quarantined", []string{"quarantined"}},
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./admin -run Golden -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file; got:\n%s\nwant:\n%s", name, got, want)
	}
}

// TestGoldenViews: every view of the fixture's store, in text and JSON,
// is what testdata holds; the JSON parses.
func TestGoldenViews(t *testing.T) {
	db := fixture(t)
	for _, v := range views {
		t.Run(v.name, func(t *testing.T) {
			args := append([]string{v.args[0], "-db", db}, v.args[1:]...)
			code, out, errOut := run(t, t0, args...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, v.name+".txt", strings.ReplaceAll(out, db, "FIXTURE"))
			code, js, errOut := run(t, t0, append(args, "-json")...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("-json: exit %d, stderr %q", code, errOut)
			}
			var any map[string]any
			if err := json.Unmarshal([]byte(js), &any); err != nil {
				t.Fatalf("-json does not parse: %v\n%s", err, js)
			}
			var pretty bytes.Buffer
			_ = json.Indent(&pretty, []byte(js), "", "  ")
			golden(t, v.name+".json", pretty.String())
		})
	}
}

// TestJSONCarriesTheTextsFacts: each partition and timer of the JSON
// views, formatted as the text views format them, is a line of the text;
// and the fixture's facts are in both.
func TestJSONCarriesTheTextsFacts(t *testing.T) {
	db := fixture(t)
	_, text, _ := run(t, t0, "partitions", "-db", db)
	_, js, _ := run(t, t0, "partitions", "-db", db, "-json")
	var parts struct {
		Partitions []PartitionReport `json:"partitions"`
		Unlinked   []Unlinked        `json:"unlinked"`
	}
	if err := json.Unmarshal([]byte(js), &parts); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts.Partitions {
		var line bytes.Buffer
		partitionLine(&line, p, t0)
		fields := strings.Fields(line.String())
		if !containsLine(text, fields) {
			t.Errorf("the text lacks the JSON's partition line %q:\n%s", fields, text)
		}
	}
	var src *PartitionReport
	for i := range parts.Partitions {
		if parts.Partitions[i].Partition == idText(ada) {
			src = &parts.Partitions[i]
		}
	}
	switch {
	case src == nil:
		t.Fatalf("no partition %s in %s", idText(ada), js)
	case src.Relay.Rows != Count{N: 3} || len(src.Relay.Blocked) != 1 || src.Relay.Blocked[0] != idText(region2) || src.Relay.Hold != 4*time.Second:
		t.Errorf("relay %+v: want 3 rows, %s blocked, held 4s", src.Relay, idText(region2))
	case len(src.Corrupt) != 1 || src.Corrupt[0].Class != "RelayKey" || src.Corrupt[0].Key != "(16, 2)" || src.Corrupt[0].Corrupt == "":
		t.Errorf("corrupt %+v: want the relay row (16, 2) with a reason", src.Corrupt)
	case src.Outcomes.Rows != 1 || src.Outcomes.Attempt != 2 || src.Outcomes.NextAttempt == nil || !src.Outcomes.NextAttempt.Equal(t0.Add(30*time.Second)):
		t.Errorf("outcomes %+v: want 1 row, attempt 2 at +30s", src.Outcomes)
	case len(src.Timers) != 3:
		t.Errorf("timers %+v: want relay, outcome-delivery and ship", src.Timers)
	case len(parts.Unlinked) != 1 || parts.Unlinked[0].Namespace != "elsewhere":
		t.Errorf("unlinked %+v: want the namespace elsewhere", parts.Unlinked)
	}
	for _, want := range []string{"corrupt RelayKey (16, 2)", "blocked target: " + idText(region2), "not linked: (\"elsewhere\")"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q", want)
		}
	}

	_, text, _ = run(t, t0, "timers", "-db", db)
	_, js, _ = run(t, t0, "timers", "-db", db, "-json")
	var tv struct {
		Timers []TimerRow `json:"timers"`
	}
	if err := json.Unmarshal([]byte(js), &tv); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, tr := range tv.Timers {
		states[tr.Name+" "+tr.Reference] = tr.State
		if !containsLine(text, []string{tr.Partition, tr.Name, `"` + tr.Reference + `"`, stamp(tr.Due), tr.State}) {
			t.Errorf("the text lacks the timer %+v", tr)
		}
	}
	want := map[string]string{"relay ": "held", "outcome-delivery ": "held", "ship ship/ada/1": "due", "ship ship/ada/2": "waiting", "ship elsewhere": "due"}
	for k, v := range want {
		if states[k] != v {
			t.Errorf("timer %s is %q, want %q (all: %v)", k, states[k], v, states)
		}
	}

	_, text, _ = run(t, t0, "lag", "-db", db)
	_, js, _ = run(t, t0, "lag", "-db", db, "-json")
	var lag LagReport
	if err := json.Unmarshal([]byte(js), &lag); err != nil {
		t.Fatal(err)
	}
	if lag.OldestRelay == nil || lag.OldestRelay.Age != 5*time.Minute || lag.MostDelayedTimer == nil ||
		lag.MostDelayedTimer.Age != 2*time.Minute || lag.MostDelayedTimer.Partition != idText(foreign) || lag.Due != 2 {
		t.Errorf("lag %+v: want a relay row 5m old, the foreign timer 2m late, 2 partitions due", lag)
	}
	for _, it := range []*LagItem{lag.OldestRelay, lag.OldestOutcome, lag.MostDelayedTimer} {
		if it != nil && !containsLine(text, []string{it.Key, it.Partition, stamp(it.At)}) {
			t.Errorf("the lag text lacks %+v:\n%s", it, text)
		}
	}
}

// containsLine reports whether a line of text holds every one of words.
func containsLine(text string, words []string) bool {
	for _, line := range strings.Split(text, "\n") {
		all := true
		for _, w := range words {
			if !strings.Contains(line, w) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// TestREADMEShowsTheGoldenOutput: the README's sample output is the
// golden tests' output, so that it cannot drift from what the command
// prints.
func TestREADMEShowsTheGoldenOutput(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"partitions.txt", "get-corrupt.txt"} {
		want, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(readme, want) {
			t.Errorf("README.md lacks testdata/%s as it is:\n%s", name, want)
		}
	}
}
