package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Hostile strings the hostile fixture stores where the views print them:
// each would be markup, an attribute or a script if printed unescaped.
const (
	hostileRef    = `<script>document.title="pwned-ref"</script>`
	hostileValue  = `"><img src=x onerror="document.title='pwned-value'">`
	hostileError  = `<img src=x onerror=alert('pwned-dead')>`
	hostileReason = `</td><script>alert('pwned-reason')</script>`
	hostileWho    = `' onmouseover='alert(1)`
	hostileNS     = `<b id=pwned-ns>ns</b>`
)

// failHostile fails every timer permanently with a hostile error.
type failHostile struct{}

func (failHostile) Kind() timers.Kind { return kindShip }

func (failHostile) Fire(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
	return nil, timers.Permanent(errors.New(hostileError))
}

// hostileFixture is the crash fixture with hostile bytes in every place
// the views print stored bytes: a timer's reference and value, a dead
// letter's last error, a quarantined row's who and why, and a partition
// of a namespace whose name is markup.
func hostileFixture(t *testing.T) string {
	t.Helper()
	path := crashFixture(t)
	l := openBolt(t, path)
	at := t0.Add(-10 * time.Minute)
	schedule(t, l, region3, timers.Timer{Kind: kindShip, Reference: "dead/" + hostileRef, DueAt: at, Value: []byte(hostileValue)})
	reg, err := timers.NewRegistry(failHostile{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := timers.RunDue(context.Background(), l, region3, reg, at, timers.RunConfig{Clock: clock.NewManual(at), Logger: slog.New(slog.DiscardHandler)})
	if err != nil || rep.DeadLettered != 1 {
		t.Fatalf("hostile dead letter: %+v %v", rep, err)
	}
	schedule(t, l, region3, timers.Timer{Kind: kindShip, Reference: hostileRef, DueAt: t0.Add(time.Hour), Value: []byte(hostileValue)})
	schedule(t, l, mustIdentity(tuple.Tuple{hostileNS, int64(1)}), timers.Timer{Kind: kindShip, Reference: hostileRef, DueAt: t0.Add(-time.Minute)})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, t0, "quarantine", "-db", path, "-partition", region3Text, "-key", "(16, 2)", "-reason", hostileReason, "-who", hostileWho, "-yes")
	if code != ExitOK {
		t.Fatalf("hostile quarantine: exit %d %s", code, errOut)
	}
	return path
}

// webService is a service holding its store open with the web view
// mounted under /admin/, as a service mounts it.
type webService struct {
	l    *fdblayer.Layer
	h    *WebHandler
	srv  *httptest.Server
	logs *bytes.Buffer
	clk  *clock.Manual
}

// serveWeb opens the bbolt file at path as the service does (for
// writing, holding bbolt's lock) and serves the web view c configures
// over it; c.Store, Clock and Logger are the test's.
func serveWeb(t *testing.T, path string, c WebConfig) *webService {
	t.Helper()
	l := openBolt(t, path)
	t.Cleanup(func() { _ = l.Close() })
	ws := &webService{l: l, logs: &bytes.Buffer{}, clk: clock.NewManual(t0)}
	c.Store, c.Clock = l, ws.clk
	c.Logger = slog.New(slog.NewTextHandler(&syncWriter{w: ws.logs}, nil))
	if c.KindNames == nil {
		c.KindNames = map[timers.Kind]string{kindShip: "ship"}
	}
	h, err := NewWebHandler(c)
	if err != nil {
		t.Fatal(err)
	}
	ws.h = h
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	ws.srv = httptest.NewServer(mux)
	t.Cleanup(ws.srv.Close)
	return ws
}

// syncWriter serializes writes to a buffer the handler logs to.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// get fetches the page at path (under /admin/) and returns its status,
// headers and body.
func (ws *webService) get(t *testing.T, path string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(ws.srv.URL + "/admin/" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// post posts form to /admin/repair with the headers given.
func (ws *webService) post(t *testing.T, form url.Values, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ws.srv.URL+"/admin/repair", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// dump is every row and wake time of the store, to tell whether a
// request wrote anything.
func dump(t *testing.T, l *fdblayer.Layer) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	_, err := walk(ctx, l, nil, 0, func(id store.Identity) error {
		idb, _ := id.AppendTuple(nil)
		at, ok, err := l.NextWake(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(&sb, "%x wake %v %v\n", idb, at.UnixMilli(), ok)
		_, err = scanRange(ctx, l, id, store.Key{0x00}, store.Key{0xFF}, 1<<20, func(k store.Key, v store.Value) {
			fmt.Fprintf(&sb, "  %x = %x\n", []byte(k), []byte(v))
		})
		return err
	}, func(Unlinked) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// formOf extracts the hidden fields of the repair form in page.
func formOf(t *testing.T, page string) url.Values {
	t.Helper()
	form := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		form.Set(m[1], htmlUnescape(m[2]))
	}
	if form.Get("token") == "" {
		t.Fatalf("no repair form in the page:\n%s", page)
	}
	return form
}

// htmlUnescape undoes html/template's escaping of an attribute value.
func htmlUnescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">", "&amp;", "&", "&#43;", "+").Replace(s)
}

// allow is an Authorize that names the operator "ops".
func allow(*http.Request, Action) (string, error) { return "ops", nil }

// TestWebViewsAreTheCommandsViews: each page's JSON is the command's
// -json of the same view, field for field, and its HTML shows the
// view's facts; the pages work while the service holds the bbolt file.
func TestWebViewsAreTheCommandsViews(t *testing.T) {
	db := crashFixture(t)
	cmdJSON := map[string]string{}
	for name, args := range map[string][]string{
		"lag": {"lag"}, "timers": {"timers"}, "due": {"timers", "-due"}, "dead": {"timers", "-dead"},
		"quarantined": {"quarantined"}, "schedulers": {"schedulers"}, "partitions": {"partitions"},
		"row": {"get", "-partition", adaText, "-key", "(16, 2)"}, "scan": {"scan", "-partition", region1Text},
	} {
		code, out, errOut := run(t, t0, append([]string{args[0], "-db", db}, args[1:]...)...)
		if code != ExitOK {
			t.Fatalf("%v: %s", args, errOut)
		}
		cmdJSON[name] = out
		if name != "partitions" {
			_, cmdJSON[name], _ = run(t, t0, append(append([]string{args[0], "-db", db}, args[1:]...), "-json")...)
		} else {
			_, cmdJSON[name], _ = run(t, t0, "partitions", "-db", db, "-json")
		}
	}
	ws := serveWeb(t, db, WebConfig{})
	same := func(name, path string, pick func(map[string]any) any) {
		t.Helper()
		code, hd, body := ws.get(t, path)
		if code != http.StatusOK || hd.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s %s", path, code, hd.Get("Content-Type"), body)
		}
		var web, cmd map[string]any
		if err := json.Unmarshal([]byte(body), &web); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := json.Unmarshal([]byte(cmdJSON[name]), &cmd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w, c := any(web), any(cmd)
		if pick != nil {
			w = pick(web)
		}
		wb, _ := json.Marshal(w)
		cb, _ := json.Marshal(c)
		if !bytes.Equal(wb, cb) {
			t.Errorf("%s differs from the command's -json:\nweb: %s\ncmd: %s", path, wb, cb)
		}
	}
	same("lag", "?format=json", nil)
	same("timers", "timers?format=json", func(m map[string]any) any { return m["timers"] })
	same("due", "timers?due=1&format=json", func(m map[string]any) any { return m["timers"] })
	same("dead", "timers?state=dead&format=json", func(m map[string]any) any { return m["dead_letters"] })
	same("quarantined", "quarantined?format=json", nil)
	same("schedulers", "schedulers?format=json", nil)
	same("partitions", "partitions?format=json", nil)
	same("row", "row?format=json&partition="+url.QueryEscape(adaText)+"&key="+url.QueryEscape("(16, 2)"), nil)
	same("scan", "scan?format=json&partition="+url.QueryEscape(region1Text), func(m map[string]any) any {
		delete(m, "class")
		return m
	})

	// The HTML shows the facts.
	for path, wants := range map[string][]string{
		"":           {"&#34;sched-a&#34; holds 1 partition lease until 2026-03-01T12:00:05.000Z (in 5s)", "parked by a scheduler's claim"},
		"partitions": {"(&#34;orders&#34;, 2, &#34;ada&#34;)", "parked", "scheduler-members"},
		"partition?partition=" + url.QueryEscape(adaText): {"held by &#34;sched-a&#34;", "CORRUPT: decode RelayV1.Target", "(&#34;orders&#34;, 1, 2)", "attempt 2"},
		"timers?state=leased":                             {"ship/ada/1", "state-leased"},
		"timers?state=dead":                               {"carrier unavailable", "no such address"},
		"schedulers":                                      {"sched-b", "expired 20s ago"},
		"quarantined":                                     {"blob", "(256 bytes)"},
		"scan?partition=" + url.QueryEscape(region3Text):  {"(256 bytes)"},
	} {
		code, _, body := ws.get(t, path)
		if code != http.StatusOK {
			t.Fatalf("%q: %d %s", path, code, body)
		}
		for _, w := range wants {
			if !strings.Contains(body, w) {
				t.Errorf("%q lacks %q", path, w)
			}
		}
	}
}

// TestWebHeadersAndMethods: every response carries the security headers;
// a view answers GET only and writes nothing; views reload themselves,
// forms do not; JSON is ?format=json.
func TestWebHeadersAndMethods(t *testing.T) {
	db := crashFixture(t)
	ws := serveWeb(t, db, WebConfig{Repairs: true, Authorize: allow})
	before := dump(t, ws.l)
	for _, path := range []string{"", "partitions", "timers", "nope", "repair?action=nope", "style.css"} {
		_, hd, _ := ws.get(t, path)
		csp := hd.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "script-src") {
			t.Errorf("%q: Content-Security-Policy %q", path, csp)
		}
		if hd.Get("X-Frame-Options") != "DENY" || hd.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%q: headers %v", path, hd)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, ws.srv.URL+"/admin/timers?state=dead", strings.NewReader("action=quarantine"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s timers: %d, want 405", m, resp.StatusCode)
		}
	}
	_, _, body := ws.get(t, "partitions")
	if !strings.Contains(body, `<meta http-equiv="refresh" content="10">`) {
		t.Errorf("partitions does not reload itself:\n%s", body)
	}
	if _, _, body := ws.get(t, "partitions?refresh=0"); strings.Contains(body, `http-equiv="refresh"`) {
		t.Errorf("?refresh=0 still reloads")
	}
	_, _, body = ws.get(t, "repair?action=unblock&partition="+url.QueryEscape(adaText)+"&target="+url.QueryEscape(`("orders", 1, 2)`))
	if strings.Contains(body, `http-equiv="refresh"`) || !strings.Contains(body, `method="post"`) {
		t.Errorf("the repair form reloads itself, or has no form:\n%s", body)
	}
	if dump(t, ws.l) != before {
		t.Error("a view or a form wrote to the store")
	}
	off := serveWeb(t, fixture(t), WebConfig{Refresh: -1})
	if _, _, body := off.get(t, "timers"); strings.Contains(body, `http-equiv="refresh"`) {
		t.Errorf("Refresh -1 still reloads")
	}
	if code, _, _ := off.get(t, "repair?action=unblock&partition="+url.QueryEscape(adaText)); code != http.StatusForbidden {
		t.Errorf("a repair form on a read-only web view: %d, want 403", code)
	}
	if _, err := NewWebHandler(WebConfig{Store: ws.l, Repairs: true}); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "Authorize") {
		t.Errorf("Repairs without Authorize: %v", err)
	}
	if _, err := NewWebHandler(WebConfig{Store: ws.l, CSRFKey: []byte("short")}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a short CSRFKey: %v", err)
	}
	if _, err := NewWebHandler(WebConfig{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no Store: %v", err)
	}
}

// TestWebRepairNeedsAuthorizationTokenAndRevision: a repair through the
// web view is written only by a POST that the authorization hook allows,
// from the same origin, with the token of a form made for that operator
// and repair, within its time, and whose revision is still the store's;
// every other request writes nothing. The repair written is recorded (who
// and why beside the row) and logged.
func TestWebRepairNeedsAuthorizationTokenAndRevision(t *testing.T) {
	db := fixture(t)
	operator := "ops"
	var asked []Action
	var mu sync.Mutex
	ws := serveWeb(t, db, WebConfig{Repairs: true, Authorize: func(r *http.Request, a Action) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, a)
		if r.Header.Get("X-Deny") != "" {
			return "", errors.New("ops only")
		}
		return operator, nil
	}})
	ctx := context.Background()
	quarantineForm := "repair?action=quarantine&partition=" + url.QueryEscape(adaText) + "&key=" + url.QueryEscape("(16, 2)") + "&expect=0f7de692912805cf"

	code, _, page := ws.get(t, quarantineForm)
	if code != http.StatusOK || !strings.Contains(page, "move RelayKey (16, 2) (rev 0f7de692912805cf) aside") {
		t.Fatalf("the form: %d\n%s", code, page)
	}
	form := formOf(t, page)
	form.Set("reason", "producer bug")
	before := dump(t, ws.l)
	refused := func(name string, status int, f url.Values, headers map[string]string) {
		t.Helper()
		code, body := ws.post(t, f, headers)
		if code != status {
			t.Errorf("%s: %d, want %d: %s", name, code, status, body)
		}
		if dump(t, ws.l) != before {
			t.Fatalf("%s wrote to the store", name)
		}
	}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for key, vs := range form {
			f[key] = append([]string(nil), vs...)
		}
		if v == "" {
			f.Del(k)
		} else {
			f.Set(k, v)
		}
		return f
	}
	refused("no token", http.StatusForbidden, with("token", ""), nil)
	refused("a forged token", http.StatusForbidden, with("token", form.Get("token")[:11]+"AAAA"), nil)
	refused("another key", http.StatusForbidden, with("key", "(16, 1)"), nil)
	refused("another revision", http.StatusForbidden, with("revision", "0000000000000000"), nil)
	refused("another repair", http.StatusForbidden, with("action", "restore"), nil)
	refused("unauthorized", http.StatusForbidden, form, map[string]string{"X-Deny": "1"})
	refused("cross-site", http.StatusForbidden, form, map[string]string{"Sec-Fetch-Site": "cross-site"})
	refused("another origin", http.StatusForbidden, form, map[string]string{"Origin": "https://evil.example"})
	refused("no reason", http.StatusBadRequest, with("reason", ""), nil)
	operator = "mallory"
	refused("another operator", http.StatusForbidden, form, nil)
	operator = "ops"
	// A GET with the form's fields shows the form again, and writes
	// nothing.
	if code, _, _ := ws.get(t, "repair?"+form.Encode()); code != http.StatusOK || dump(t, ws.l) != before {
		t.Errorf("a GET with the form's fields: %d, or it wrote", code)
	}
	// An expired form.
	ws.clk.Advance(DefaultTokenTTL + time.Second)
	refused("an expired form", http.StatusForbidden, form, nil)
	ws.clk.Set(t0)

	// Stale: the row changes between the form and the POST (the same
	// bytes back would be the same rev: a change of value is what
	// counts).
	p := ada
	old, _, _ := ws.l.Get(ctx, p, store.Key(tuple.AppendUint(tuple.AppendUint(nil, 16), 2)))
	if out, err := ws.l.Apply(ctx, p, store.NewBatch().Put(tuple.AppendUint(tuple.AppendUint(nil, 16), 2), []byte{0x01, 0xbe, 0xef})); err != nil || !out.Committed() {
		t.Fatal(out, err)
	}
	before = dump(t, ws.l)
	refused("a row changed since the form", http.StatusConflict, form, nil)
	if out, err := ws.l.Apply(ctx, p, store.NewBatch().Put(tuple.AppendUint(tuple.AppendUint(nil, 16), 2), old)); err != nil || !out.Committed() {
		t.Fatal(out, err)
	}
	// A form whose expect is stale is refused at once.
	staleForm := strings.Replace(quarantineForm, "0f7de692912805cf", "0000000000000000", 1)
	if code, _, body := ws.get(t, staleForm); code != http.StatusConflict || !strings.Contains(body, "changed since it was shown") {
		t.Errorf("a form with a stale expect: %d %s", code, body)
	}

	// The form as made, posted by its operator: written, recorded, logged.
	code, body := ws.post(t, form, map[string]string{"Origin": ws.srv.URL, "Sec-Fetch-Site": "same-origin"})
	if code != http.StatusOK || !strings.Contains(body, "done: (16, 2) moved aside") {
		t.Fatalf("the repair: %d %s", code, body)
	}
	rep, err := (&viewer{l: ws.l, now: t0, maxRows: 10}).quarantinedRows(ctx, nil, nil, 0)
	if err != nil || len(rep.Quarantined) != 1 || rep.Quarantined[0].Who != "ops" || rep.Quarantined[0].Reason != "producer bug" || rep.Quarantined[0].At != stamp(t0) {
		t.Errorf("quarantined %+v %v: want (16, 2) by ops at %s, for the producer bug", rep.Quarantined, err, stamp(t0))
	}
	logs := ws.logs.String()
	for _, want := range []string{`msg="admin: web view: repair written" action=quarantine partition="(\"orders\", 2, \"ada\")" who=ops reason="producer bug"`, `outcome=refused`, `error="not authorized: ops only"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	// Posted again: refused, the row is gone from its queue.
	before = dump(t, ws.l)
	refused("the same form again", http.StatusConflict, form, nil)

	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 || asked[0].Name != "quarantine" || asked[0].Partition != adaText || asked[0].Key != "(16, 2)" || asked[0].Write {
		t.Errorf("Authorize was asked %+v", asked)
	}
}

// TestWebEscapesStoredMarkup: keys and values holding markup, quotes and
// attributes are printed as text on every page: no element, attribute or
// script of theirs exists in the HTML.
func TestWebEscapesStoredMarkup(t *testing.T) {
	db := hostileFixture(t)
	ws := serveWeb(t, db, WebConfig{Repairs: true, Authorize: allow})
	pages := []string{"", "partitions", "timers", "timers?state=dead", "quarantined", "schedulers",
		"partition?partition=" + url.QueryEscape(region3Text), "scan?partition=" + url.QueryEscape(region3Text),
		"partition?partition=" + url.QueryEscape(`("`+hostileNS+`", 1)`),
		"timers?kind=" + url.QueryEscape(hostileRef), "row?partition=" + url.QueryEscape(hostileValue),
		"repair?action=redrive&kind=ship&ref=" + url.QueryEscape(hostileRef) + "&partition=" + url.QueryEscape(region3Text),
	}
	for _, path := range pages {
		_, _, body := ws.get(t, path)
		if m := injectedMarkup(body); m != "" {
			t.Errorf("%q prints stored markup unescaped: %s", path, m)
		}
	}
	// And they are there, as text.
	_, _, body := ws.get(t, "timers?state=dead")
	if !strings.Contains(body, "&lt;img src=x onerror=alert(&#39;pwned-dead&#39;)&gt;") {
		t.Errorf("the dead letter's hostile error is not shown escaped:\n%s", body)
	}
	_, _, body = ws.get(t, "quarantined")
	if !strings.Contains(body, "&lt;/td&gt;&lt;script&gt;alert(&#39;pwned-reason&#39;)&lt;/script&gt;") || !strings.Contains(body, "&#39; onmouseover=&#39;alert(1)") {
		t.Errorf("the hostile who and why are not shown escaped:\n%s", body)
	}
	_, _, body = ws.get(t, "partitions")
	if !strings.Contains(body, "&lt;b id=pwned-ns&gt;ns&lt;/b&gt;") {
		t.Errorf("the hostile namespace is not shown escaped")
	}
}

// injectedMarkup returns the first tag of html that the hostile strings
// could have made: a script, img, svg or b element, or any tag with an
// event handler attribute ("" when there is none). Text escaped by the
// templates holds no tag, since its < is &lt;.
func injectedMarkup(html string) string {
	for _, tag := range regexp.MustCompile(`<[^>]*>`).FindAllString(html, -1) {
		if regexp.MustCompile(`(?i)^<(script|img|svg|b)[\s>]|\son[a-z]+\s*=`).MatchString(tag) {
			return tag
		}
	}
	return ""
}

// TestWebRenderUnit: the templates escape a report holding markup in
// every field a page prints, without a store.
func TestWebRenderUnit(t *testing.T) {
	row := Row{Key: hostileRef, Class: "RelayKey", Parsed: hostileValue, Record: hostileRef, Value: hostileValue, short: hostileValue, Rev: hostileWho, Corrupt: ""}
	pg := PartitionPage{
		Report: PartitionReport{Partition: hostileNS, Kind: hostileRef, Relay: RelayReport{Blocked: []string{hostileValue}},
			Lease: &LeaseReport{Owner: hostileWho, Expires: t0}, Note: hostileReason, Members: []MemberRow{{Owner: hostileRef, Key: hostileValue}}},
		Relay:       ScanReport{Partition: hostileNS, Rows: []Row{row}},
		Timers:      []TimerRow{{Partition: hostileNS, Name: hostileRef, Reference: hostileRef, State: "held", Note: hostileError, Row: row, Kind: 1000}},
		Quarantined: []QuarantinedRow{{Partition: hostileNS, Row: row, Who: hostileWho, Reason: hostileReason, Rev: hostileValue}},
		DeadLetters: []DeadLetterRow{{Partition: hostileNS, Name: hostileRef, Reference: hostileRef, LastError: hostileError, short: hostileValue}},
	}
	var buf bytes.Buffer
	if err := webPages.ExecuteTemplate(&buf, "partition", webPage{Title: "t", Now: t0, Repairs: true, Query: url.Values{"x": {hostileRef}}, Data: pg}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if m := injectedMarkup(html); m != "" {
		t.Errorf("the partition page prints markup unescaped: %s\n%s", m, html)
	}
	for _, want := range []string{"&lt;script&gt;document.title=&#34;pwned-ref&#34;&lt;/script&gt;", "&#34;&gt;&lt;img src=x onerror=&#34;document.title=&#39;pwned-value&#39;&#34;&gt;"} {
		if !strings.Contains(html, want) {
			t.Errorf("the partition page lacks %q", want)
		}
	}
	// Links carry stored bytes as escaped query values only.
	if !strings.Contains(html, `href="row?key=%3Cscript%3Edocument.title%3D%22pwned-ref%22%3C%2Fscript%3E&amp;partition=%3Cb&#43;id%3Dpwned-ns%3Ens%3C%2Fb%3E"`) {
		t.Errorf("a row link does not escape its key:\n%s", html)
	}
}

// TestREADMEShowsTheWebViewExample: the README's web view snippet is
// ExampleNewWebHandler's code, which go test compiles and runs.
func TestREADMEShowsTheWebViewExample(t *testing.T) {
	ex, err := os.ReadFile("example_web_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(ex)
	a, b := strings.Index(s, "// README:begin\n"), strings.Index(s, "\t// README:end")
	if a < 0 || b < a {
		t.Fatal("example_web_test.go lacks its README markers")
	}
	var code strings.Builder
	for _, line := range strings.SplitAfter(s[a+len("// README:begin\n"):b], "\n") {
		code.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if !strings.Contains(string(readme), "```go\n"+code.String()+"```\n") {
		t.Errorf("README.md lacks ExampleNewWebHandler's code as it is:\n%s", code.String())
	}
}

// relayOnly is a handler of a kind other than the fixture's ship timers.
type relayOnly struct{}

func (relayOnly) Kind() timers.Kind { return 2000 }

func (relayOnly) Fire(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
	return timers.Done{}, nil
}

// TestWebSaysAKindHasNoHandler: given the service's Registry, the web
// view shows a due timer of a kind the service registers no handler for
// as held, and says why; without it (as the command, which cannot know),
// the timer is due.
func TestWebSaysAKindHasNoHandler(t *testing.T) {
	db := fixture(t)
	reg, err := timers.NewRegistry(relayOnly{})
	if err != nil {
		t.Fatal(err)
	}
	ws := serveWeb(t, db, WebConfig{Registry: reg})
	_, _, body := ws.get(t, "timers?format=json&kind=ship&state=held")
	var pg TimersPage
	if err := json.Unmarshal([]byte(body), &pg); err != nil {
		t.Fatal(err)
	}
	if pg.Timers == nil || len(pg.Timers.Timers) != 2 {
		t.Fatalf("held ship timers: %s", body)
	}
	for _, tr := range pg.Timers.Timers {
		if tr.Reference != "ship/ada/1" && tr.Reference != "elsewhere" || !strings.Contains(tr.Note, "this service registers no handler for ship") {
			t.Errorf("timer %+v: want the due ship timers held for want of a handler", tr)
		}
	}
	without := serveWeb(t, fixture(t), WebConfig{})
	_, _, body = without.get(t, "timers?format=json&kind=ship&state=due")
	if !strings.Contains(body, `"reference":"ship/ada/1"`) || !strings.Contains(body, `"state":"due"`) {
		t.Errorf("without a Registry the due ship timer is not due: %s", body)
	}
}
