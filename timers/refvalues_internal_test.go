package timers

import (
	"errors"
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/gen"
)

// A reference entry reads through its generated family: a U64Value (every
// entry before retry policies) upgrades to a TimerRefV2 of the same due
// time and nothing else; a TimerRefV2 reads as it is.
func TestRefEntriesOfEveryVersionDecode(t *testing.T) {
	v1, err := gen.EncodeU64Value(gen.U64Value{Value: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeRefState(v1)
	if err != nil || st != (refState{due: 10_000}) || !st.plain() {
		t.Errorf("a U64Value entry decodes as %+v, %v; want due 10000 only", st, err)
	}
	want := refState{due: 20_000, attempts: 3, lastErr: "boom", periodAt: 15_000}
	v2, err := gen.EncodeTimerRefV2(gen.TimerRefV2{DueAtMs: want.due, Attempts: want.attempts, LastError: want.lastErr, PeriodAtMs: want.periodAt})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := decodeRefState(v2); err != nil || st != want {
		t.Errorf("a TimerRefV2 entry decodes as %+v, %v; want %+v", st, err, want)
	}
}

// Entries are written in the newest version the store's mkit format
// allows: at format 2 a plain state as a U64Value, any other as a
// TimerRefV2, each read back as written; at format 1 (and for a format
// left 0) every state as the U64Value of its due time, the rest dropped.
func TestRefEntriesAreWrittenInTheirVersion(t *testing.T) {
	for _, format := range []uint32{0, 1, gen.FormatTimerRefV2} {
		for _, st := range []refState{
			{due: 1},
			{due: 2, attempts: 1},
			{due: 3, lastErr: "x"},
			{due: 4, periodAt: 2},
		} {
			st.format = format
			v := encodeRefState(st)
			ver, err := gen.VersionOfTimerRefKeyValue(v)
			wantVer, want := uint8(gen.VersionTimerRefV2), st
			if st.plain() || format < gen.FormatTimerRefV2 {
				wantVer, want = gen.VersionU64Value, refState{due: st.due}
			}
			if err != nil || ver != wantVer {
				t.Errorf("%+v is written as version %d (%v), want %d", st, ver, err, wantVer)
			}
			want.format = 0 // not stored
			if back, err := decodeRefState(v); err != nil || back != want {
				t.Errorf("%+v reads back as %+v, %v; want %+v", st, back, err, want)
			}
		}
	}
}

// At a store format before TimerRefV2, the family writes a U64Value that
// keeps the due time: the downgrade drops attempts, the last error and a
// period's time, and nothing else; below format 1 nothing is written.
func TestRefDowngradeKeepsTheDueTime(t *testing.T) {
	full := gen.TimerRefV2{DueAtMs: 7_000, Attempts: 2, LastError: "late", PeriodAtMs: 6_000}
	v, err := refValues.Encode(full, gen.FormatU64Value)
	if err != nil {
		t.Fatal(err)
	}
	u, err := gen.DecodeU64Value(v)
	if err != nil || u.Value != full.DueAtMs {
		t.Errorf("at format 1 the entry is %x (%+v, %v), want the U64Value of due time %d", v, u, err, full.DueAtMs)
	}
	if st, err := decodeRefState(v); err != nil || st != (refState{due: full.DueAtMs}) {
		t.Errorf("the downgraded entry reads as %+v, %v", st, err)
	}
	if v, err := refValues.Encode(full, gen.FormatTimerRefV2); err != nil || v[0] != gen.VersionTimerRefV2 {
		t.Errorf("at format 2 the entry is %x, %v; want a TimerRefV2", v, err)
	}
	if _, err := refValues.Encode(full, 0); !errors.Is(err, wire.ErrFormatTooOld) {
		t.Errorf("at format 0: %v; want wire.ErrFormatTooOld", err)
	}
}

// BenchmarkRefEntryDecode decodes a reference entry of each version as
// the timers read it: a U64Value with its upgrade to a TimerRefV2, and a
// TimerRefV2 through its own fast path; U64Value-direct is the U64Value
// decoder alone, what reading one cost before families.
func BenchmarkRefEntryDecode(b *testing.B) {
	v1, err := gen.EncodeU64Value(gen.U64Value{Value: 1_772_366_404_000})
	if err != nil {
		b.Fatal(err)
	}
	v2, err := gen.EncodeTimerRefV2(gen.TimerRefV2{DueAtMs: 1_772_366_404_000, Attempts: 3, LastError: "gateway timeout", PeriodAtMs: 1_772_366_400_000})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("U64Value-direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gen.DecodeU64Value(v1); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name string
		v    []byte
	}{{"U64Value-upgraded", v1}, {"TimerRefV2", v2}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeRefState(c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
