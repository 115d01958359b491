package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/quarantine"
)

// maxRepairForm bounds the body of a repair's POST.
const maxRepairForm = 64 << 10

// repairFields are the form fields that name a repair's arguments, as
// the views print them: every repair reads those it takes.
var repairFields = []string{"partition", "key", "target", "kind", "ref", "due", "expect"}

// RepairPage is a repair's confirmation form, or what its POST did.
type RepairPage struct {
	Action Action `json:"action"`
	// Fields are the repair's arguments, as the form carries them.
	Fields url.Values `json:"fields"`
	// Who is the operator Authorize named.
	Who string `json:"who"`
	// Lines say what the repair does; Nothing, when set, why it has
	// nothing to do.
	Lines   []string `json:"lines"`
	Nothing string   `json:"nothing,omitempty"`
	// Revision is a hash of every row the repair read (see the package's
	// design note on the web view), and Token the form's: both go back
	// with the POST.
	Revision string `json:"revision"`
	Token    string `json:"token,omitempty"`
	// NeedReason says the form asks why; Done what the POST wrote.
	NeedReason bool   `json:"need_reason"`
	Done       string `json:"done,omitempty"`
}

// action is the Action the request's fields name.
func action(name string, f url.Values, write bool) Action {
	return Action{Name: name, Partition: f.Get("partition"), Key: f.Get("key"), Target: f.Get("target"),
		Kind: f.Get("kind"), Reference: f.Get("ref"), Due: f.Get("due"), Reason: f.Get("reason"), Write: write}
}

// request parses the fields into the repair's request.
func repairRequestOf(f url.Values, who string) (repairRequest, error) {
	req := repairRequest{kind: f.Get("kind"), ref: f.Get("ref"), deadDue: f.Get("due"), expect: f.Get("expect"),
		who: who, reason: f.Get("reason")}
	var err error
	for _, p := range []struct {
		name string
		dst  *[]byte
	}{{"partition", &req.partition}, {"key", &req.key}, {"target", &req.target}} {
		if *p.dst, err = tupleParam(f, p.name); err != nil {
			return req, err
		}
	}
	return req, nil
}

// repair serves /repair: GET shows the confirmation form of the repair
// ?action= names, POST writes it.
func (h *WebHandler) repair(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodPost:
		w.Header().Set("Allow", "GET, POST")
		h.fail(w, r, http.StatusMethodNotAllowed, "a repair is shown by GET and written by POST")
		return
	case !h.cfg.Repairs:
		h.fail(w, r, http.StatusForbidden, "repairs are off: this service mounts the web view read-only (WebConfig.Repairs)")
		return
	}
	write := r.Method == http.MethodPost
	fields := r.URL.Query()
	if write {
		if err := h.origins.Check(r); err != nil {
			h.refuse(w, r, http.StatusForbidden, Action{Name: "?", Write: true}, "", "a cross-origin request: "+err.Error())
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRepairForm)
		if err := r.ParseForm(); err != nil {
			h.fail(w, r, http.StatusBadRequest, "the form does not parse: "+err.Error())
			return
		}
		fields = r.PostForm
	}
	name := fields.Get("action")
	rp, ok := repairs[name]
	if !ok {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("no repair %q: one of %s", name, strings.Join(repairNames(), ", ")))
		return
	}
	a := action(name, fields, write)
	who, err := h.cfg.Authorize(r, a)
	switch {
	case err != nil:
		h.refuse(w, r, http.StatusForbidden, a, who, "not authorized: "+err.Error())
		return
	case who == "" || len(who) > quarantine.MaxWho:
		h.refuse(w, r, http.StatusForbidden, a, who, fmt.Sprintf("not authorized: Authorize named no operator, or one of over %d bytes", quarantine.MaxWho))
		return
	}
	page := RepairPage{Action: a, Fields: url.Values{}, Who: who, NeedReason: true}
	for _, f := range repairFields {
		if v := fields.Get(f); v != "" {
			page.Fields.Set(f, v)
		}
	}
	v := h.viewer()
	if write && !h.validToken(fields.Get("token"), who, name, page.Fields, fields.Get("revision"), v.now) {
		h.refuse(w, r, http.StatusForbidden, a, who, "the form's token is not valid for this operator and repair, or is older than "+h.cfg.TokenTTL.String()+": open the repair again")
		return
	}
	req, err := repairRequestOf(fields, who)
	if err == nil && rp.prepare != nil {
		err = rp.prepare(name, &req)
	}
	if err == nil {
		err = rp.checkArgs(req)
	}
	if err == nil && write && strings.TrimSpace(req.reason) == "" {
		err = usagef("%s: the reason is required: say why; it is logged, and recorded beside a quarantined row", name)
	}
	var plan *repairPlan
	if err == nil {
		plan, err = rp.plan(r.Context(), &repairContext{v: v}, req)
	}
	if err != nil {
		if write {
			h.logRepair(r, a, who, "refused", err)
		}
		h.failErr(w, r, err)
		return
	}
	page.Lines, page.Nothing, page.Revision = plan.lines, plan.nothing, plan.revision()
	if !write {
		if plan.b != nil {
			page.Token = h.token(who, name, page.Fields, page.Revision, v.now)
		}
		h.render(w, r, "repair", http.StatusOK, webPage{Title: "Repair: " + name, Now: v.now, Data: page})
		return
	}
	switch {
	case plan.b == nil:
		err = refusedf("%s: %s", name, plan.nothing)
	case plan.revision() != fields.Get("revision"):
		err = refusedf("%s refused: what it reads changed since the form was shown (revision %s, now %s); nothing written: open the repair again to see it as it is now", name, fields.Get("revision"), plan.revision())
	default:
		err = applyPlan(r.Context(), h.cfg.Store, req.partition, name, plan)
	}
	if err != nil {
		h.logRepair(r, a, who, "refused", err)
		h.failErr(w, r, err)
		return
	}
	h.logRepair(r, a, who, "written", nil)
	page.Done = plan.done
	h.render(w, r, "repair", http.StatusOK, webPage{Title: "Repaired: " + name, Now: v.now, Data: page})
}

// refuse logs and answers a repair refused before anything was read.
func (h *WebHandler) refuse(w http.ResponseWriter, r *http.Request, status int, a Action, who, msg string) {
	if a.Write {
		h.logRepair(r, a, who, "refused", errors.New(msg))
	}
	h.fail(w, r, status, msg)
}

// logRepair logs a repair's POST: who, what, why, from where, and what
// came of it.
func (h *WebHandler) logRepair(r *http.Request, a Action, who, outcome string, err error) {
	attrs := []any{"action", a.Name, "partition", a.Partition, "who", who, "reason", a.Reason, "remote", r.RemoteAddr, "outcome", outcome}
	for _, f := range []struct{ k, v string }{{"key", a.Key}, {"target", a.Target}, {"kind", a.Kind}, {"ref", a.Reference}, {"due", a.Due}} {
		if f.v != "" {
			attrs = append(attrs, f.k, f.v)
		}
	}
	if err != nil {
		h.cfg.Logger.Warn("admin: web view: repair refused", append(attrs, "error", err.Error())...)
		return
	}
	h.cfg.Logger.Info("admin: web view: repair written", attrs...)
}

// repairNames are the repairs' names, sorted.
func repairNames() []string {
	names := make([]string, 0, len(repairs))
	for n := range repairs {
		names = append(names, n)
	}
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && names[j] < names[j-1]; j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
	return names
}

// tokenMAC is the MAC a form's token carries: of the operator, the
// repair, its fields, the plan's revision and when the form was made.
func (h *WebHandler) tokenMAC(issued int64, who, name string, fields url.Values, revision string) []byte {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte("mkitfdb admin repair form v1\x00"))
	for _, s := range []string{strconv.FormatInt(issued, 10), who, name, fields.Encode(), revision} {
		m.Write([]byte(strconv.Itoa(len(s))))
		m.Write([]byte{':'})
		m.Write([]byte(s))
	}
	return m.Sum(nil)
}

// token is a form's token: when it was made, and the MAC.
func (h *WebHandler) token(who, name string, fields url.Values, revision string, now time.Time) string {
	issued := now.Unix()
	return strconv.FormatInt(issued, 10) + "." + base64.RawURLEncoding.EncodeToString(h.tokenMAC(issued, who, name, fields, revision))
}

// validToken reports whether token was made by this handler for this
// operator, repair, fields and revision, at most TokenTTL before now.
func (h *WebHandler) validToken(token, who, name string, fields url.Values, revision string, now time.Time) bool {
	ts, mac64, ok := strings.Cut(token, ".")
	if !ok {
		return false
	}
	issued, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	mac, err := base64.RawURLEncoding.DecodeString(mac64)
	if err != nil {
		return false
	}
	age := now.Sub(time.Unix(issued, 0))
	return hmac.Equal(mac, h.tokenMAC(issued, who, name, fields, revision)) && age >= -time.Minute && age <= h.cfg.TokenTTL
}
