package admin

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// chromiumPath is the Chromium (or Chrome) the browser test drives; it
// skips the test, in one line, where there is none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: apt-get install chromium (.ci/run installs it) to run the browser test")
	return ""
}

// artifactsDir is where the browser test saves its screenshots: under
// $MKITFDB_ARTIFACTS when it is set (kept), else in the test's temporary
// directory (removed with it). The test logs which.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if root := os.Getenv("MKITFDB_ARTIFACTS"); root != "" {
		dir = filepath.Join(root, "admin-web")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s (set MKITFDB_ARTIFACTS to keep them)", dir)
	return dir
}

// browser starts headless Chromium at path, with a fresh profile and no
// network of its own beyond the pages it is sent to.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1500, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it lives as long as ctx.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// page is a browser tab on the web view.
type page struct {
	t   *testing.T
	ctx context.Context
	ws  *webService
	dir string
	n   int
}

// run runs steps, each bounded in time.
func (p *page) run(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("chromium: %v", err)
	}
}

func (p *page) text(sel string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		p.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func eval[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// open navigates to the web view's path, checks that no stored markup
// became an element or ran, and saves a screenshot named name.
func (p *page) open(path, name string) {
	p.t.Helper()
	p.run(chromedp.Navigate(p.ws.srv.URL+"/admin/"+path), chromedp.WaitReady("main"))
	p.checkClean(name)
}

// checkClean fails the test when the page holds an element or attribute
// the stored bytes could have injected, or a script ran; then it saves a
// screenshot.
func (p *page) checkClean(name string) {
	p.t.Helper()
	if n := eval[int](p, `document.querySelectorAll("script, img, svg, iframe, b#pwned-ns, [onerror], [onmouseover], [onload]").length`); n != 0 {
		p.t.Errorf("%s: %d injected elements in the DOM", name, n)
	}
	if title := eval[string](p, "document.title"); strings.Contains(title, "pwned") {
		p.t.Errorf("%s: a stored script ran: the title is %q", name, title)
	}
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot of %s: %v", name, err)
	}
	p.n++
	if err := os.WriteFile(filepath.Join(p.dir, fmt.Sprintf("%02d-%s.png", p.n, name)), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// has fails the test unless the text of sel holds every one of wants.
func (p *page) has(sel string, wants ...string) {
	p.t.Helper()
	got := p.text(sel)
	for _, w := range wants {
		if !strings.Contains(got, w) {
			p.t.Errorf("%s lacks %q:\n%s", sel, w, got)
		}
	}
}

// TestWebViewInChromium drives every page of the web view, mounted by a
// service holding its bbolt store open, in headless Chromium, with
// JavaScript and without: each page shows what the store holds (a
// partition's relay queue, a scheduler's held lease, a dead letter's last
// error, the quarantined rows, the memberships), no stored markup becomes
// an element or runs, views reload themselves and forms do not; and an
// operator quarantines a corrupt row through the form, without
// JavaScript, which the store then holds with who and why. Screenshots of
// every page are saved (see artifactsDir).
func TestWebViewInChromium(t *testing.T) {
	path := chromiumPath(t)
	db := hostileFixture(t)
	reg, err := timers.NewRegistry(shipAll{})
	if err != nil {
		t.Fatal(err)
	}
	ws := serveWeb(t, db, WebConfig{Repairs: true, Authorize: allow, Registry: reg})
	p := &page{t: t, ctx: browser(t, path), ws: ws, dir: artifactsDir(t)}
	ctx := context.Background()

	// What the store holds, read from it directly.
	v := ws.h.viewer()
	adaState, err := v.stateOf(ctx, mustIdentityOf(ada))
	if err != nil || adaState.lease == nil {
		t.Fatalf("ada's lease: %+v %v", adaState, err)
	}
	relayRows, err := v.scan(ctx, mustBytes(ada), "RelayKey", nil, 100)
	if err != nil || len(relayRows.Rows) != 3 {
		t.Fatalf("ada's relay rows: %+v %v", relayRows, err)
	}
	var deadErrors []string
	for _, id := range []store.Identity{mustIdentityOf(region1), mustIdentityOf(region3)} {
		dls, _, err := timers.DeadLetters(ctx, store.ReaderOf(ws.l, id), nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dls {
			deadErrors = append(deadErrors, d.LastError)
		}
	}
	if len(deadErrors) != 4 {
		t.Fatalf("the fixture's dead letters: %q", deadErrors)
	}
	quarantined, err := v.quarantinedRows(ctx, nil, nil, 0)
	if err != nil || len(quarantined.Quarantined) != 2 {
		t.Fatalf("the fixture's quarantined rows: %+v %v", quarantined, err)
	}
	members, _, err := v.memberRows(ctx)
	if err != nil || len(members) != 2 {
		t.Fatalf("the fixture's memberships: %+v %v", members, err)
	}
	adaP := url.QueryEscape(adaText)

	for _, js := range []bool{true, false} {
		mode := "js"
		if !js {
			mode = "nojs"
		}
		p.run(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !js})
			return err
		}))

		p.open("", mode+"-overview")
		lag, err := v.lag(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.has("#summary", fmt.Sprintf("partitions\t%d", lag.Partitions), fmt.Sprintf("parked by a scheduler's claim\t%d", lag.Parked))
		p.has("main", adaState.lease.Owner, stamp(adaState.lease.Expires))
		if !eval[bool](p, `document.querySelector('meta[http-equiv="refresh"]') !== null`) {
			t.Errorf("%s: the overview does not reload itself", mode)
		}

		p.open("partitions", mode+"-partitions")
		p.has("#partitions", adaText, "parked", `"`+adaState.lease.Owner+`" until `+stamp(adaState.lease.Expires), "scheduler-members")

		p.open("partition?partition="+adaP, mode+"-partition")
		p.has("#lease", "held by \""+adaState.lease.Owner+"\" until "+stamp(adaState.lease.Expires))
		for _, r := range relayRows.Rows {
			p.has("#relay", r.Key, r.Rev)
		}
		if n := eval[int](p, `document.querySelectorAll("#relay tr").length`); n != len(relayRows.Rows)+1 {
			t.Errorf("%s: the relay queue shows %d rows, the store holds %d", mode, n-1, len(relayRows.Rows))
		}
		p.has("#blocked", `("orders", 1, 2)`)
		p.has("#timers", "ship/ada/1", "leased")

		p.open("timers?state=leased", mode+"-timers-leased")
		p.has("#timers", "ship/ada/1", "leased: held by \"sched-a\"", "elsewhere", "held by \"sched-b\"")

		p.open("timers?state=dead", mode+"-dead-letters")
		p.has("#dead", deadErrors...)

		p.open("quarantined", mode+"-quarantined")
		for _, q := range quarantined.Quarantined {
			p.has("#quarantined", q.Row.Key, q.Reason, q.Who, q.Rev)
		}

		p.open("schedulers", mode+"-schedulers")
		for _, m := range members {
			p.has("#members", m.Owner)
		}
		p.has("#leases", adaText, foreignText(), "expired")

		p.open("scan?partition="+url.QueryEscape(region3Text), mode+"-scan")
		p.has("#rows", "(256 bytes)", strconv.Quote("dead/"+hostileRef), strconv.Quote(hostileError))

		p.open("row?partition="+url.QueryEscape(region3Text)+"&key="+url.QueryEscape(`(200, "blob")`), mode+"-row")
		p.has("#value", strings.Repeat("nil, ", 255)+"nil)")

		p.open("partition?partition="+url.QueryEscape(`("`+hostileNS+`", 1)`), mode+"-hostile-partition")
		p.has("#partition", hostileNS)
		p.has("#timers", strconv.Quote(hostileRef))
	}

	// A repair through the form, without JavaScript: quarantine ada's
	// corrupt relay row from its partition page.
	before := relayRows.Rows[1]
	if before.Key != "(16, 2)" || before.Corrupt == "" {
		t.Fatalf("ada's second relay row: %+v", before)
	}
	p.open("partition?partition="+adaP, "nojs-before-repair")
	p.run(chromedp.Click(`#relay a.repair[href*="%2816%2C+2%29"]`), chromedp.WaitReady("#confirm"))
	p.checkClean("nojs-repair-form")
	p.has("#plan", "move RelayKey (16, 2) (rev "+before.Rev+") aside", "it is corrupt")
	if eval[bool](p, `document.querySelector('meta[http-equiv="refresh"]') !== null`) {
		t.Error("the repair form reloads itself")
	}
	p.run(chromedp.SendKeys("#reason", "producer bug: truncated row"), chromedp.Click("#confirm"), chromedp.WaitReady("#done"))
	p.checkClean("nojs-repair-done")
	p.has("#done", "(16, 2) moved aside")
	q, err := ws.h.viewer().quarantinedRows(ctx, mustBytes(ada), nil, 0)
	if err != nil || len(q.Quarantined) != 1 || q.Quarantined[0].Row.Key != "(16, 2)" || q.Quarantined[0].Who != "ops" || q.Quarantined[0].Reason != "producer bug: truncated row" {
		t.Errorf("after the repair, ada's quarantined rows are %+v (%v)", q.Quarantined, err)
	}
	if !strings.Contains(ws.logs.String(), `msg="admin: web view: repair written" action=quarantine`) {
		t.Errorf("the repair was not logged:\n%s", ws.logs.String())
	}
}

func mustBytes(p store.Partition) []byte {
	b, err := p.AppendTuple(nil)
	if err != nil {
		panic(err)
	}
	return b
}

func mustIdentityOf(p store.Partition) store.Identity {
	id, err := store.ParseIdentity(mustBytes(p))
	if err != nil {
		panic(err)
	}
	return id
}

func foreignText() string { return idText(foreign) }
