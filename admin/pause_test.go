package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/timers"
)

var errDenied = errors.New("denied")

// countShips counts the fires of the fixture service's ship timers.
type countShips struct {
	mu   sync.Mutex
	refs map[string]int
}

func (*countShips) Kind() timers.Kind { return kindShip }

func (c *countShips) Fire(_ context.Context, _ *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == nil {
		c.refs = map[string]int{}
	}
	c.refs[t.Reference]++
	return timers.Done{}, nil
}

// tickAt runs one tick of a scheduler of the fixture service, firing h's
// kind, over the bbolt file at path at the time at, and returns its
// report.
func tickAt(t *testing.T, path string, at time.Time, h timers.Handler) timers.TickReport {
	t.Helper()
	l := openBolt(t, path)
	defer l.Close()
	reg, err := timers.NewRegistry(h)
	if err != nil {
		t.Fatal(err)
	}
	s, err := timers.NewScheduler(timers.SchedulerConfig{Store: l, Registry: reg, Owner: "svc-1", Workers: 1,
		Clock: clock.NewManual(at), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// pauseFixture is the fixture with the kind ship paused by "ops" a
// minute before now, a scheduler's tick at now that left the ship timers
// due where they are, and the queues of region 1 paused.
func pauseFixture(t *testing.T, h timers.Handler) string {
	t.Helper()
	db := fixture(t)
	code, out, errOut := run(t, t0.Add(-time.Minute), "pause", "-db", db, "-kind", "ship", "-reason", "carrier down", "-who", "ops", "-yes")
	if code != ExitOK || !strings.Contains(out, "done: the kind ship is paused") {
		t.Fatalf("pause: exit %d\n%s%s", code, out, errOut)
	}
	rep := tickAt(t, db, t0, h)
	if rep.Claimed != 2 || rep.Timers.Paused != 2 || rep.Timers.Fired != 0 || rep.Timers.Failed != 0 {
		t.Fatalf("the tick under the pause: %+v", rep)
	}
	code, out, errOut = run(t, t0, "pause", "-db", db, "-partition", region1Text, "-reason", "webhook down", "-who", "ops", "-yes")
	if code != ExitOK {
		t.Fatalf("pause -partition: exit %d\n%s%s", code, out, errOut)
	}
	return db
}

// pauseViews are the golden cases of the views of a store with pauses.
var pauseViews = []struct {
	name string
	args []string
}{
	{"pause-partitions", []string{"partitions"}},
	{"pause-timers", []string{"timers"}},
	{"pause-timers-due", []string{"timers", "-due"}},
	{"pause-lag", []string{"lag"}},
	{"pause-schedulers", []string{"schedulers"}},
}

// TestGoldenPauseViews: every store-wide view shows the pauses (who, when,
// why, rev), the paused timers' state and why, and a paused partition's
// wake time as what it means, never as a date in the far future; in text
// and in JSON.
func TestGoldenPauseViews(t *testing.T) {
	db := pauseFixture(t, shipAll{})
	for _, v := range pauseViews {
		t.Run(v.name, func(t *testing.T) {
			args := append([]string{v.args[0], "-db", db}, v.args[1:]...)
			code, out, errOut := run(t, t0, args...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if strings.Contains(out, "146") {
				t.Errorf("a paused wake time printed as a date:\n%s", out)
			}
			golden(t, v.name+".txt", strings.ReplaceAll(out, db, "FIXTURE"))
			code, js, _ := run(t, t0, append(args, "-json")...)
			if code != ExitOK {
				t.Fatalf("-json: exit %d", code)
			}
			for _, m := range regexp.MustCompile(`"(wake|at|due|next_due)":"([^"]*)"`).FindAllStringSubmatch(js, -1) {
				if !strings.HasPrefix(m[2], "2026-") {
					t.Errorf("%s %q in JSON: a date nowhere near now", m[1], m[2])
				}
			}
			golden(t, v.name+".json", indent(t, js))
		})
	}
}

// lagOf reads the lag view's JSON.
func lagOf(t *testing.T, db string, now time.Time) LagReport {
	t.Helper()
	code, js, errOut := run(t, now, "lag", "-db", db, "-json")
	if code != ExitOK {
		t.Fatalf("lag: %d %s", code, errOut)
	}
	var rep LagReport
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestPauseAndResumeCommands: pause and resume refuse bad input (exit 2)
// and a changed pause (-expect, exit 1), say when there is nothing to
// do, record who, when and why; once resumed, every paused timer fires
// once at the schedulers' next tick, and nothing failed meanwhile.
func TestPauseAndResumeCommands(t *testing.T) {
	ships := &countShips{}
	db := pauseFixture(t, ships)
	for _, args := range [][]string{
		{"pause", "-kind", "ship", "-yes"},                                        // no reason
		{"pause", "-kind", "ship", "-partition", adaText, "-reason", "x", "-yes"}, // both
		{"resume", "-yes"}, // neither
		{"pause", "-kind", "0", "-reason", "x", "-yes"},                          // no kind
		{"pause", "-kind", "ship", "-reason", strings.Repeat("r", 2000), "-yes"}, // too long
		{"resume", "-kind", "ship"},                                              // no -yes, no terminal
	} {
		code, out, errOut := run(t, t0, append([]string{args[0], "-db", db}, args[1:]...)...)
		if code != ExitUsage || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q: want one line and exit 2", args, code, errOut, out)
		}
	}
	lag := lagOf(t, db, t0)
	if len(lag.Pauses) != 1 || lag.Pauses[0].Who != "ops" || lag.Pauses[0].Reason != "carrier down" || !lag.Pauses[0].At.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("pauses: %+v", lag.Pauses)
	}
	if lag.PausedPartitions != 2 {
		t.Errorf("paused partitions: %d, want 2", lag.PausedPartitions)
	}
	rev := lag.Pauses[0].Rev

	code, out, _ := run(t, t0, "pause", "-db", db, "-kind", "ship", "-reason", "again", "-yes")
	if code != ExitOK || !strings.Contains(out, "paused by \"ops\"") || !strings.Contains(out, "nothing to do") {
		t.Errorf("a second pause: exit %d %q", code, out)
	}
	code, _, errOut := run(t, t0, "resume", "-db", db, "-kind", "ship", "-expect", "0123456789abcdef", "-yes")
	if code != ExitFailed || !strings.Contains(errOut, "changed since it was shown") {
		t.Errorf("resume with a stale -expect: exit %d %q", code, errOut)
	}
	if ships.refs != nil {
		t.Fatalf("a paused kind fired: %v", ships.refs)
	}
	// Still paused at a later tick: nothing fires, nothing is claimed.
	if rep := tickAt(t, db, t0.Add(time.Second), ships); rep.Claimed != 0 || ships.refs != nil {
		t.Fatalf("a tick under the pause: %+v, fired %v", rep, ships.refs)
	}

	code, out, errOut = run(t, t0.Add(2*time.Second), "resume", "-db", db, "-kind", "ship", "-expect", rev, "-yes")
	if code != ExitOK || !strings.Contains(out, `paused by "ops"`) || !strings.Contains(out, "done: the kind ship is resumed") {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = run(t, t0.Add(2*time.Second), "partitions", "-db", db)
	if code != ExitOK || !strings.Contains(out, "resumed: next tick") {
		t.Errorf("partitions after the resume:\n%s", out)
	}
	code, out, _ = run(t, t0.Add(2*time.Second), "resume", "-db", db, "-kind", "ship", "-yes")
	if code != ExitOK || !strings.Contains(out, "is not paused: nothing to do") {
		t.Errorf("a second resume: exit %d %q", code, out)
	}
	rep := tickAt(t, db, t0.Add(3*time.Second), ships)
	if rep.Timers.Failed+rep.Timers.Retried+rep.Timers.DeadLettered != 0 {
		t.Errorf("after the resume: %+v", rep.Timers)
	}
	if len(ships.refs) != 2 || ships.refs["ship/ada/1"] != 1 || ships.refs["elsewhere"] != 1 {
		t.Errorf("fired after the resume: %v, want ship/ada/1 and elsewhere once each", ships.refs)
	}
	tickAt(t, db, t0.Add(4*time.Second), ships)
	if len(ships.refs) != 2 || ships.refs["ship/ada/1"] != 1 {
		t.Errorf("fired again: %v", ships.refs)
	}
	if lag := lagOf(t, db, t0.Add(5*time.Second)); len(lag.Pauses) != 0 || lag.PausedPartitions != 0 {
		t.Errorf("after the resume: pauses %+v, %d paused partitions", lag.Pauses, lag.PausedPartitions)
	}

	// The partition's queues: resumed with its rev.
	code, js, _ := run(t, t0.Add(5*time.Second), "partitions", "-db", db, "-json")
	if code != ExitOK {
		t.Fatal(js)
	}
	var parts PartitionsReport
	if err := json.Unmarshal([]byte(js), &parts); err != nil {
		t.Fatal(err)
	}
	var qrev string
	for _, p := range parts.Partitions {
		if p.Partition == region1Text && p.Pause != nil {
			qrev = p.Pause.Rev
		}
	}
	if qrev == "" {
		t.Fatalf("region 1's pause not shown:\n%s", js)
	}
	code, out, errOut = run(t, t0.Add(5*time.Second), "resume", "-db", db, "-partition", region1Text, "-expect", qrev, "-yes")
	if code != ExitOK || !strings.Contains(out, "webhook down") {
		t.Errorf("resume -partition: exit %d\n%s%s", code, out, errOut)
	}
}

// TestWebPauseAndResume: the web view pauses and resumes behind the
// Authorize hook, the form's token and its revision, as its repairs
// are; its pages show the pause (golden HTML and JSON).
func TestWebPauseAndResume(t *testing.T) {
	db := pauseFixture(t, shipAll{})
	ws := serveWeb(t, db, WebConfig{Repairs: true, Authorize: allow})
	_, _, lagJS := ws.get(t, "?format=json")
	golden(t, "web-pause-lag.json", indent(t, lagJS))
	_, _, page := ws.get(t, "partition?refresh=0&partition="+url.QueryEscape(adaText))
	golden(t, "web-pause-partition.html", page)
	_, _, page = ws.get(t, "?refresh=0")
	golden(t, "web-pause-overview.html", page)

	// Resume the kind: a POST without the form's token, or with a
	// revision of another state, writes nothing.
	code, _, form := ws.get(t, "repair?action=resume&kind=1000")
	if code != http.StatusOK {
		t.Fatalf("resume form: %d\n%s", code, form)
	}
	f := formOf(t, form)
	before := dump(t, ws.l)
	noToken := url.Values{}
	for k, v := range f {
		noToken[k] = v
	}
	noToken.Del("token")
	noToken.Set("reason", "carrier back")
	if code, _ := ws.post(t, noToken, nil); code != http.StatusForbidden {
		t.Errorf("a POST without a token: %d", code)
	}
	badRev := url.Values{}
	for k, v := range f {
		badRev[k] = v
	}
	badRev.Set("revision", "0000000000000000")
	badRev.Set("reason", "carrier back")
	if code, _ := ws.post(t, badRev, nil); code != http.StatusForbidden {
		t.Errorf("a POST with another revision: %d", code)
	}
	if dump(t, ws.l) != before {
		t.Fatal("a refused resume wrote")
	}
	f.Set("reason", "carrier back")
	code, body := ws.post(t, f, nil)
	if code != http.StatusOK || !strings.Contains(body, "the kind ship is resumed") {
		t.Fatalf("resume: %d\n%s", code, body)
	}
	if !strings.Contains(ws.logs.String(), "action=resume") || !strings.Contains(ws.logs.String(), `reason="carrier back"`) {
		t.Errorf("the resume is not logged:\n%s", ws.logs)
	}

	// Pause it again through the form, recorded with Authorize's name.
	_, _, form = ws.get(t, "repair?action=pause&kind=ship")
	f = formOf(t, form)
	f.Set("reason", "carrier down again")
	if code, body := ws.post(t, f, nil); code != http.StatusOK || !strings.Contains(body, "the kind ship is paused") {
		t.Fatalf("pause: %d\n%s", code, body)
	}
	_, _, lagJS = ws.get(t, "?format=json")
	var lag LagReport
	if err := json.Unmarshal([]byte(lagJS), &lag); err != nil {
		t.Fatal(err)
	}
	if len(lag.Pauses) != 1 || lag.Pauses[0].Who != "ops" || lag.Pauses[0].Reason != "carrier down again" {
		t.Errorf("the pause recorded: %+v", lag.Pauses)
	}

	// Read-only, or refused by Authorize: no form, nothing written.
	ro := serveWeb(t, fixture(t), WebConfig{})
	if code, _, _ := ro.get(t, "repair?action=pause&kind=ship"); code != http.StatusForbidden {
		t.Errorf("a read-only web view offers a pause: %d", code)
	}
	deny := serveWeb(t, fixture(t), WebConfig{Repairs: true, Authorize: func(*http.Request, Action) (string, error) {
		return "", errDenied
	}})
	if code, _, _ := deny.get(t, "repair?action=pause&kind=ship"); code != http.StatusForbidden {
		t.Errorf("a pause Authorize refuses: %d", code)
	}
}
