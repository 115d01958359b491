package reservations

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
)

// checkPayload checks that the payload of reservation r encodes exactly
// what encoding/json makes of FromReservation's Outcome, and fails alike.
func checkPayload(t *testing.T, rid refdomain.ReservationID, r refdomain.ReservationV1) {
	t.Helper()
	const audience = "https://example.test"
	o, oerr := FromReservation(rid, audience, r)
	got, perr := payload{rid, audience, r}.AppendJSON([]byte("prefix"))
	if (oerr == nil) != (perr == nil) || oerr != nil && oerr.Error() != perr.Error() {
		t.Fatalf("%#v: FromReservation fails with %v, AppendJSON with %v", r, oerr, perr)
	}
	ev, eerr := event(rid, audience, r)
	if (oerr == nil) != (eerr == nil) || oerr != nil && oerr.Error() != eerr.Error() {
		t.Fatalf("%#v: FromReservation fails with %v, event with %v", r, oerr, eerr)
	}
	if oerr != nil {
		return
	}
	want, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendJSON:\n%s\nencoding/json:\nprefix%s", got, want)
	}
	if ev.Type != o.eventType() || !ev.Time.Equal(o.timestamp()) {
		t.Errorf("event %q at %v, want %q at %v", ev.Type, ev.Time, o.eventType(), o.timestamp())
	}
	if _, ok := ev.Data.(outcome.JSONAppender); !ok {
		t.Errorf("event data %T encodes through encoding/json", ev.Data)
	}
}

// The payload's own encoder writes what encoding/json writes, for
// reservations of every shape and strings that need escaping.
func TestPayloadEncodesAsEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", `q"uote`, `back\slash`, "<b>&amp;</b>", "a<b", "a>b", "a&b", "tab\tnew\nline\x01", "é ü 日本", "line\u2028sep\u2029", "\x7f del", "bad \xff utf8"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return strs[rng.IntN(len(strs))] }
	name := func() string {
		for {
			s := pick()
			if _, err := refdomain.NewRepoName(s); err == nil {
				return s
			}
		}
	}
	for range 500 {
		rid, err := refdomain.NewReservationID("r" + name())
		if err != nil {
			continue
		}
		var r refdomain.ReservationV1
		switch rng.IntN(4) {
		case 0:
			c := &refdomain.ReservationCommitted{Repository: refdomain.MustRepoName("r" + name()), OccurredAtMs: rng.Uint64(), BytesStored: rng.Uint64(), NewToRepo: rng.Uint64N(9), NewToStore: 0}
			for range rng.IntN(3) {
				ref, err := refdomain.NewShardRef("refs/" + name())
				if err != nil {
					continue
				}
				c.Refs = append(c.Refs, refdomain.RefUpdate{Ref: ref, OldOID: bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(21)), NewOID: []byte{0xab, 0x01}})
			}
			r = c
		case 1:
			r = &refdomain.ReservationAborted{Repository: refdomain.MustRepoName("r" + name()), OccurredAtMs: rng.Uint64N(1 << 50), Reason: refdomain.AbortReason(rng.IntN(7)), Detail: pick() + pick()}
		case 2:
			r = &refdomain.ReservationTicketed{}
		default:
			r = nil
		}
		checkPayload(t, rid, r)
	}
	checkPayload(t, refdomain.MustReservationID("n"), (*refdomain.ReservationCommitted)(nil))
	checkPayload(t, refdomain.MustReservationID("n"), (*refdomain.ReservationAborted)(nil))
}

// FuzzPayloadEncodesAsEncodingJSON: whatever the strings, the payload's
// encoder writes what encoding/json writes.
func FuzzPayloadEncodesAsEncodingJSON(f *testing.F) {
	f.Add("repo", "refs/heads/main", "detail", uint64(7))
	f.Add("<&>", "ref\u2028", "\"\\\x00\xff", uint64(1<<63))
	f.Fuzz(func(t *testing.T, repo, ref, detail string, at uint64) {
		rn, err := refdomain.NewRepoName(repo)
		if err != nil {
			return
		}
		r := &refdomain.ReservationAborted{Repository: rn, OccurredAtMs: at, Reason: refdomain.AbortReasonRejected, Detail: detail}
		checkPayload(t, refdomain.MustReservationID("a"), r)
		if sr, err := refdomain.NewShardRef(ref); err == nil {
			checkPayload(t, refdomain.MustReservationID("c"), &refdomain.ReservationCommitted{Repository: rn, OccurredAtMs: at, Refs: []refdomain.RefUpdate{{Ref: sr, NewOID: []byte(detail)}}})
		}
	})
}
