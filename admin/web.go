package admin

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Design note: the web view.
//
// The web view is the command's views inside the running service: the
// service mounts a WebHandler on its own mux, and each page reads the
// service's live store through the viewer the command uses, so it works
// on bbolt while the service holds the file and on FoundationDB alike.
// Each page is a view's report rendered as HTML (html/template, no
// script) or, with ?format=json, as the JSON the command's -json prints.
//
// Safe by default. Every key and value is attacker-influenced bytes: the
// templates print them as text only, escaped by html/template in the
// context they land in (never as template.HTML, nor as a URL of their
// own), and links carry them as escaped query values. Every response
// carries a Content-Security-Policy with no script source at all (style
// from the handler only, no framing, forms posting to the handler only),
// X-Frame-Options DENY, X-Content-Type-Options nosniff, no referrer and
// no caching. A view changes nothing, whatever its method.
//
// Repairs are off unless WebConfig.Repairs is set, and then each needs
// WebConfig.Authorize, which the service supplies: it names the operator
// from the request (the service's own authentication) or refuses. A
// repair is two requests. GET /repair reads what the repair would change,
// exactly as the command does before it asks for confirmation, and shows
// it in a form (nothing is written); the form carries the plan's
// revision, a hash of every row the repair read, and a token: an
// HMAC-SHA256, under a key of the handler's, of the operator's name, the
// repair, its arguments, the revision and when the form was made. POST
// /repair writes: it refuses a cross-origin browser request
// (Sec-Fetch-Site, or Origin against Host: net/http's
// CrossOriginProtection), asks Authorize again, checks the token
// (hmac.Equal; made for this operator, this repair and this revision,
// within TokenTTL), plans the repair anew and refuses it, nothing
// written, when its revision is not the form's: a row changed since the
// operator confirmed. The batch it applies is guarded on every row read,
// as the command's is. No cookie is set, so there is no session to ride
// on: a forged POST lacks a token, and a token is good for one operator,
// one repair of one state, for minutes. Each POST is logged (who, what,
// why, from where, and the outcome), and a quarantine records who, when
// and why beside the row, as the command does.

// Defaults of a WebConfig.
const (
	DefaultWebRefresh  = 10 * time.Second
	DefaultWebPageSize = 100
	DefaultTokenTTL    = 10 * time.Minute
)

// WebConfig configures a WebHandler (see NewWebHandler). Store is
// required; a zero value of any other field takes its default.
type WebConfig struct {
	// Store is the service's live store, as fdblayer.Open returned it.
	Store *fdblayer.Layer
	// KindNames names the service's timer kinds in the views, as
	// Config.KindNames does the command's.
	KindNames map[timers.Kind]string
	// Registry, optional, is the service's timer registry: with it, a
	// due timer of a kind it has no handler for is shown held, and why.
	Registry *timers.Registry
	// Refresh is how often a view reloads itself (an HTML meta refresh;
	// default DefaultWebRefresh; negative: never). Forms never reload,
	// and ?refresh=0 stops a view's.
	Refresh time.Duration
	// MaxRows bounds the rows a view reads of each queue of a partition
	// (default DefaultMaxRows), as the command's -max-rows.
	MaxRows int
	// PageSize bounds the partitions one page of a store-wide view reads
	// (default DefaultWebPageSize); the page links to the next.
	PageSize int
	// Repairs enables the repairs (default: read-only). It needs
	// Authorize.
	Repairs bool
	// Authorize is called for each repair, with the request and the
	// action, before anything is read for it: for the confirmation form
	// (a GET, Action.Write false) and for the POST that writes (Write
	// true). It returns the operator's name, recorded as the command's
	// -who is (at most 256 bytes, the same for both requests), or an
	// error, which refuses the repair (403, the error's text shown).
	Authorize func(r *http.Request, a Action) (who string, err error)
	// CSRFKey is the secret the forms' tokens are signed with, at least
	// 32 bytes. Empty: NewWebHandler draws one, so a form made by one
	// process is refused by another (give replicas behind one address a
	// shared key).
	CSRFKey []byte
	// TokenTTL is how long a confirmation form can be posted (default
	// DefaultTokenTTL).
	TokenTTL time.Duration
	// Clock tells the time the views measure ages against and repairs
	// record (default: the real clock).
	Clock clock.Clock
	// Logger logs each repair posted (default slog.Default()).
	Logger *slog.Logger
}

// Action is a repair as WebConfig.Authorize sees it. Its fields are the
// form's, as the views print them ("" when the repair takes none).
type Action struct {
	// Name is the repair: quarantine, restore, unblock, redrive,
	// redrive-dead, delete-dead, pause or resume, as the command's
	// subcommands.
	Name string
	// Partition is the partition; Key the row (quarantine, restore);
	// Target the blocked target (unblock); Kind, Reference and Due the
	// timer or dead letter (redrive, redrive-dead, delete-dead); Kind
	// alone the kind a pause or resume names for the whole store
	// (Partition "" then).
	Partition, Key, Target, Kind, Reference, Due string
	// Reason is the operator's why (on the POST only).
	Reason string
	// Write is true for the POST that writes, false for the form.
	Write bool
}

// WebHandler is the web view: an http.Handler a service mounts on its own
// mux, under a path of its own ending in a slash, with http.StripPrefix:
//
//	mux.Handle("/admin/", http.StripPrefix("/admin", h))
//
// Its pages link to one another by relative paths. It is safe for
// concurrent use.
type WebHandler struct {
	cfg     WebConfig
	pages   *template.Template
	key     []byte
	origins *http.CrossOriginProtection
}

// NewWebHandler returns the web view c configures; it keeps a copy of
// KindNames and CSRFKey. It fails with an error wrapping store.ErrInvalid
// naming the field when Store is nil, Repairs is set without Authorize,
// CSRFKey is shorter than 32 bytes, or MaxRows, PageSize or TokenTTL is
// negative. It does no I/O.
func NewWebHandler(c WebConfig) (*WebHandler, error) {
	switch {
	case c.Store == nil:
		return nil, fmt.Errorf("admin: WebConfig.Store is nil: %w", store.ErrInvalid)
	case c.Repairs && c.Authorize == nil:
		return nil, fmt.Errorf("admin: WebConfig.Repairs needs WebConfig.Authorize, which names the operator or refuses: %w", store.ErrInvalid)
	case len(c.CSRFKey) > 0 && len(c.CSRFKey) < 32:
		return nil, fmt.Errorf("admin: WebConfig.CSRFKey has %d bytes, at least 32: %w", len(c.CSRFKey), store.ErrInvalid)
	case c.MaxRows < 0 || c.PageSize < 0 || c.TokenTTL < 0:
		return nil, fmt.Errorf("admin: WebConfig.MaxRows, PageSize and TokenTTL are at least 0: %w", store.ErrInvalid)
	}
	c.KindNames = maps.Clone(c.KindNames)
	if c.Refresh == 0 {
		c.Refresh = DefaultWebRefresh
	}
	if c.MaxRows == 0 {
		c.MaxRows = DefaultMaxRows
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultWebPageSize
	}
	if c.TokenTTL == 0 {
		c.TokenTTL = DefaultTokenTTL
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	key := append([]byte(nil), c.CSRFKey...)
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("admin: draw a CSRF key: %w", err)
		}
	}
	c.CSRFKey = nil
	return &WebHandler{cfg: c, pages: webPages, key: key, origins: http.NewCrossOriginProtection()}, nil
}

//go:embed web
var webFiles embed.FS

// webPages are the pages' templates (web/pages.html).
var webPages = template.Must(template.New("").Funcs(template.FuncMap{
	"stamp": stamp,
	"rel":   rel,
	"relp": func(t *time.Time, now time.Time) string {
		if t == nil {
			return "-"
		}
		return rel(*t, now)
	},
	"lease":    func(ls *LeaseReport, now time.Time) string { return ls.text(now) },
	"holder":   func(h LeaseHolder, now time.Time) string { return h.text(now) },
	"member":   func(m MemberRow, now time.Time) string { return m.text(now) },
	"unlinked": func(u Unlinked) string { return u.text() },
	"kindnum":  func(k uint16) string { return strconv.Itoa(int(k)) },
	"link":     link,
	"self": func(q url.Values, k, v string) string {
		q = maps.Clone(q)
		q.Set(k, v)
		return "?" + q.Encode()
	},
	"lagrow": func(label string, it *LagItem) any {
		return struct {
			Label string
			Item  *LagItem
		}{label, it}
	},
	"rowsof": func(rows []Row, partition string, repairs bool, id string) any {
		return struct {
			Rows          []Row
			Partition, ID string
			Repairs       bool
		}{rows, partition, id, repairs}
	},
	"timersof": func(ts []TimerRow, now time.Time, repairs bool) any {
		return struct {
			Timers  []TimerRow
			Now     time.Time
			Repairs bool
		}{ts, now, repairs}
	},
	"deadof": func(ds []DeadLetterRow, now time.Time, repairs bool) any {
		return struct {
			Dead    []DeadLetterRow
			Now     time.Time
			Repairs bool
		}{ds, now, repairs}
	},
	"pausesof": func(ps []PauseReport, now time.Time, repairs bool) any {
		return struct {
			Pauses  []PauseReport
			Now     time.Time
			Repairs bool
		}{ps, now, repairs}
	},
	"pausedwake": func(rep PartitionReport, now time.Time) string { return rep.pausedWakeText(now) },
	"quarantinedof": func(qs []QuarantinedRow, repairs bool) any {
		return struct {
			Rows    []QuarantinedRow
			Repairs bool
		}{qs, repairs}
	},
	"quarantinable": func(class string) bool {
		return class == "RelayKey" || class == "OutcomePendingKey" || class == "TimerKey" || class == "TimerRefKey"
	},
	"lastkey": func(rows []Row) string {
		if len(rows) == 0 {
			return ""
		}
		return rows[len(rows)-1].Key
	},
}).ParseFS(webFiles, "web/pages.html"))

// link is a relative link to the page at path with the query pairs kv
// (name, value, ...), those with a value only, each value escaped: the
// whole of an href, which html/template filters as a URL.
func link(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// webStyle is the pages' style sheet.
var webStyle, _ = webFiles.ReadFile("web/style.css")

// webPage is what a page's template renders.
type webPage struct {
	Title   string
	Now     time.Time
	Refresh int // seconds; 0: none
	Repairs bool
	Query   url.Values // the request's query, for the links of filters
	Data    any
	// Status and Error are an error page's.
	Status int
	Error  string
}

// ServeHTTP serves the pages: / and lag (the lag view), partitions,
// partition, timers, quarantined, schedulers, row, scan, repair and
// style.css; a view with ?format=json answers its JSON.
func (h *WebHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	path := strings.TrimPrefix(r.URL.Path, "/")
	if path == "repair" {
		h.repair(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		h.fail(w, r, http.StatusMethodNotAllowed, "a view answers GET only: it changes nothing")
		return
	}
	if path == "style.css" {
		hd.Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write(webStyle)
		return
	}
	view, ok := webViews[path]
	if !ok {
		h.fail(w, r, http.StatusNotFound, "no page "+strconv.Quote(r.URL.Path))
		return
	}
	v := h.viewer()
	data, err := view.read(r.Context(), h, v, r.URL.Query())
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	h.render(w, r, view.name, http.StatusOK, webPage{Title: view.title, Now: v.now, Refresh: h.refresh(r), Data: data})
}

// webView is one of the pages that show a view.
type webView struct {
	name, title string
	read        func(ctx context.Context, h *WebHandler, v *viewer, q url.Values) (any, error)
}

// webViews are the view pages, by path.
var webViews = map[string]webView{
	"":            {"overview", "Overview", readOverview},
	"lag":         {"overview", "Overview", readOverview},
	"partitions":  {"partitions", "Partitions", readPartitions},
	"partition":   {"partition", "Partition", readPartition},
	"timers":      {"timers", "Timers", readTimers},
	"quarantined": {"quarantined", "Quarantined rows", readQuarantined},
	"schedulers":  {"schedulers", "Schedulers", readSchedulers},
	"row":         {"row", "Row", readRow},
	"scan":        {"scan", "Rows", readScan},
}

// viewer is the reader of the views' facts at this moment.
func (h *WebHandler) viewer() *viewer {
	v := &viewer{l: h.cfg.Store, now: h.cfg.Clock.Now(), kindNames: h.cfg.KindNames, maxRows: h.cfg.MaxRows}
	if reg := h.cfg.Registry; reg != nil {
		v.handled = func(k timers.Kind) bool { _, ok := reg.Lookup(k); return ok }
	}
	return v
}

func (h *WebHandler) refresh(r *http.Request) int {
	if h.cfg.Refresh < 0 || r.URL.Query().Get("refresh") == "0" {
		return 0
	}
	return max(int(h.cfg.Refresh/time.Second), 1)
}

// wantsJSON reports whether the request asks for JSON: ?format=json.
func wantsJSON(r *http.Request) bool { return r.URL.Query().Get("format") == "json" }

// render writes page as the template name fills it, or its Data as JSON.
func (h *WebHandler) render(w http.ResponseWriter, r *http.Request, name string, status int, page webPage) {
	page.Repairs = h.cfg.Repairs
	page.Query = r.URL.Query()
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		body := page.Data
		if page.Error != "" {
			body = map[string]any{"error": page.Error, "status": status}
		}
		_ = json.NewEncoder(w).Encode(body)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := h.pages.ExecuteTemplate(w, name, page); err != nil {
		h.cfg.Logger.Error("admin: web view: render", "page", name, "error", err)
	}
}

// fail answers an error page.
func (h *WebHandler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, "error", status, webPage{Title: http.StatusText(status), Now: h.cfg.Clock.Now(), Status: status, Error: msg})
}

// failErr answers err: bad input 400, a refused repair 409, the store's
// failure 500.
func (h *WebHandler) failErr(w http.ResponseWriter, r *http.Request, err error) {
	var ue *usageError
	var re *refusedError
	switch {
	case errors.As(err, &ue):
		h.fail(w, r, http.StatusBadRequest, ue.msg)
	case errors.As(err, &re):
		h.fail(w, r, http.StatusConflict, re.msg)
	case errors.Is(err, errNoRow):
		h.fail(w, r, http.StatusNotFound, err.Error())
	default:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
	}
}

// errNoRow is a row page of a key that holds no row.
var errNoRow = errors.New("no row there")

// tupleParam parses the query parameter name as views print a partition
// or key; "" is nil.
func tupleParam(q url.Values, name string) ([]byte, error) {
	s := q.Get(name)
	if s == "" {
		return nil, nil
	}
	b, err := parseTupleText(s)
	if err != nil {
		return nil, usagef("%s does not parse: %v", name, err)
	}
	return b, nil
}

// partitionParam is the partition the query names, required.
func partitionParam(q url.Values) ([]byte, error) {
	id, err := tupleParam(q, "partition")
	switch {
	case err != nil:
		return nil, err
	case id == nil:
		return nil, usagef("the partition is required: ?partition=(\"orders\", 2, \"ada\")")
	}
	if _, err := store.ParseIdentity(id); err != nil || id[0] == 0xFF {
		return nil, usagef("%s is no partition identity (a tuple)", formatTuple(id))
	}
	return id, nil
}

// afterParam is where a store-wide page continues.
func afterParam(q url.Values) ([]byte, error) { return tupleParam(q, "after") }

func readOverview(ctx context.Context, _ *WebHandler, v *viewer, _ url.Values) (any, error) {
	return v.lag(ctx)
}

func readPartitions(ctx context.Context, h *WebHandler, v *viewer, q url.Values) (any, error) {
	after, err := afterParam(q)
	if err != nil {
		return nil, err
	}
	rep := PartitionsReport{Now: v.now.UTC(), Partitions: []PartitionReport{}, Unlinked: []Unlinked{}}
	next, err := v.partitions(ctx, after, h.cfg.PageSize, func(p PartitionReport) error {
		rep.Partitions = append(rep.Partitions, p)
		return nil
	}, func(u Unlinked) error { rep.Unlinked = append(rep.Unlinked, u); return nil })
	if next != nil {
		rep.Next = formatTuple(next)
	}
	return rep, err
}

// PartitionPage is one partition as the web view's partition page shows
// it: its report, its relay queue, timers, pending outcomes, quarantined
// rows and dead letters.
type PartitionPage struct {
	Report      PartitionReport  `json:"report"`
	Relay       ScanReport       `json:"relay"`
	Timers      []TimerRow       `json:"timers"`
	TimersMore  bool             `json:"timers_more"`
	Pending     ScanReport       `json:"pending"`
	Quarantined []QuarantinedRow `json:"quarantined"`
	DeadLetters []DeadLetterRow  `json:"dead_letters"`
	DeadMore    bool             `json:"dead_more"`
}

// webQueueRows bounds the rows of each queue the partition page lists.
const webQueueRows = 100

func readPartition(ctx context.Context, _ *WebHandler, v *viewer, q url.Values) (any, error) {
	id, err := partitionParam(q)
	if err != nil {
		return nil, err
	}
	p, _ := store.ParseIdentity(id)
	var pg PartitionPage
	if pg.Report, err = v.inspect(ctx, p); err != nil {
		return nil, err
	}
	if pg.Relay, err = v.scan(ctx, id, "RelayKey", nil, min(v.maxRows, webQueueRows)); err != nil {
		return nil, err
	}
	var n Count
	if pg.Timers, n, err = v.partitionTimers(ctx, p, 0); err != nil {
		return nil, err
	}
	pg.TimersMore = n.More
	if pg.Timers == nil {
		pg.Timers = []TimerRow{}
	}
	if pg.Pending, err = v.scan(ctx, id, "OutcomePendingKey", nil, min(v.maxRows, webQueueRows)); err != nil {
		return nil, err
	}
	if pg.Quarantined, err = v.partitionQuarantined(ctx, p); err != nil {
		return nil, err
	}
	if pg.Quarantined == nil {
		pg.Quarantined = []QuarantinedRow{}
	}
	if pg.DeadLetters, pg.DeadMore, err = v.deadLetterRows(ctx, p); err != nil {
		return nil, err
	}
	if pg.DeadLetters == nil {
		pg.DeadLetters = []DeadLetterRow{}
	}
	return pg, nil
}

// TimersPage is the web view's timers page: the timers, or with
// state=dead the dead letters, of the filters it names.
type TimersPage struct {
	Kind      string             `json:"kind,omitempty"`
	State     string             `json:"state,omitempty"`
	Partition string             `json:"partition,omitempty"`
	Due       bool               `json:"due,omitempty"`
	States    []string           `json:"-"`
	Timers    *TimersReport      `json:"timers,omitempty"`
	Dead      *DeadLettersReport `json:"dead_letters,omitempty"`
}

func readTimers(ctx context.Context, h *WebHandler, v *viewer, q url.Values) (any, error) {
	pg := TimersPage{Kind: q.Get("kind"), State: q.Get("state"), Partition: q.Get("partition"), Due: q.Get("due") == "1", States: TimerStates}
	f := timerFilter{due: pg.Due, state: pg.State, limit: h.cfg.PageSize}
	var err error
	if f.partition, err = tupleParam(q, "partition"); err != nil {
		return nil, err
	}
	if f.after, err = afterParam(q); err != nil {
		return nil, err
	}
	if pg.Kind != "" {
		if f.kind, err = v.parseKind(pg.Kind); err != nil {
			return nil, err
		}
	}
	switch {
	case pg.State == "dead":
		if pg.Due || pg.Kind != "" {
			return nil, usagef("state=dead lists every dead letter: a dead letter is never due, and kind filters timers")
		}
		rep, err := v.deadLetters(ctx, f.partition, f.after, f.limit)
		pg.Dead = &rep
		return pg, err
	case pg.State != "" && !containsString(TimerStates, pg.State):
		return nil, usagef("state %q is none of %s", pg.State, strings.Join(TimerStates, ", "))
	}
	rep, err := v.timers(ctx, f)
	pg.Timers = &rep
	return pg, err
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func readQuarantined(ctx context.Context, h *WebHandler, v *viewer, q url.Values) (any, error) {
	id, err := tupleParam(q, "partition")
	if err != nil {
		return nil, err
	}
	after, err := afterParam(q)
	if err != nil {
		return nil, err
	}
	return v.quarantinedRows(ctx, id, after, h.cfg.PageSize)
}

func readSchedulers(ctx context.Context, h *WebHandler, v *viewer, q url.Values) (any, error) {
	after, err := afterParam(q)
	if err != nil {
		return nil, err
	}
	return v.schedulers(ctx, after, h.cfg.PageSize)
}

func readRow(ctx context.Context, _ *WebHandler, v *viewer, q url.Values) (any, error) {
	id, err := partitionParam(q)
	if err != nil {
		return nil, err
	}
	key, err := tupleParam(q, "key")
	switch {
	case err != nil:
		return nil, err
	case key == nil:
		return nil, usagef("the key is required: ?key=(16, 2)")
	}
	rep, ok, err := v.get(ctx, id, key)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %s in %s", errNoRow, formatTuple(key), formatTuple(id))
	}
	return rep, err
}

// ScanPage is the web view's rows page.
type ScanPage struct {
	ScanReport
	Class string `json:"class,omitempty"`
}

func readScan(ctx context.Context, _ *WebHandler, v *viewer, q url.Values) (any, error) {
	id, err := partitionParam(q)
	if err != nil {
		return nil, err
	}
	after, err := tupleParam(q, "after")
	if err != nil {
		return nil, err
	}
	rep, err := v.scan(ctx, id, q.Get("class"), after, min(v.maxRows, webQueueRows))
	return ScanPage{ScanReport: rep, Class: q.Get("class")}, err
}
