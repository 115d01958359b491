package relay

import (
	"testing"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// TestResetPinsNoStoreMemory: reset clears the slices that point into the
// rows read unless the rows lay in the kept read buffer, not regrown or
// dropped during the fire; batches and groups are always cleared.
func TestResetPinsNoStoreMemory(t *testing.T) {
	for _, tc := range []struct {
		name      string
		readsKept bool
		regrow    bool // readBuf regrown during the fire
		drop      bool // readBuf over maxKeptReadBytes
		wantWipe  bool
	}{
		{"read with Scan", false, false, false, true},
		{"read into the kept buffer", true, false, false, false},
		{"kept buffer regrown", true, true, false, true},
		{"kept buffer dropped", true, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scratch{targets: targetIndex{groupOf: map[string]int{}}}
			s.readBuf = make([]byte, 0, 64)
			s.reset()
			row := []byte("row")
			s.readsKept = tc.readsKept
			switch {
			case tc.regrow:
				s.readBuf = make([]byte, 0, 128)
			case tc.drop:
				s.readBuf = make([]byte, 0, maxKeptReadBytes+1)
			}
			s.raw = append(s.raw, store.KeyValue{Key: row, Value: row})
			s.rows = append(s.rows, queued{key: row, value: row})
			s.flat = append(s.flat, Row{Source: store.Identity{}, Record: gen.RelayV1{Target: row}})
			s.puts = append(s.puts, gen.RelayPut{Key: row})
			target, err := store.IdentityOf(refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("t")})
			if err != nil {
				t.Fatal(err)
			}
			s.groups = append(s.groups, group{target: target, id: row})
			s.lanes = append(s.lanes, &lane{})
			s.lanes[0].batch.Put(store.Key(row), store.Value(row))
			s.reset()
			if len(s.raw) != 0 || len(s.rows) != 0 || len(s.flat) != 0 || len(s.puts) != 0 {
				t.Fatal("reset left rows in the window")
			}
			wiped := s.raw[:1][0].Key == nil && s.rows[:1][0].key == nil && s.flat[:1][0].Record.Target == nil && s.puts[:1][0].Key == nil
			if wiped != tc.wantWipe {
				t.Fatalf("row slices wiped: %v, want %v", wiped, tc.wantWipe)
			}
			if s.groups[:1][0].target != nil || s.groups[:1][0].id != nil || s.lanes[0].batch.Writes[:1][0].Key != nil {
				t.Fatal("reset left a group or a batch write")
			}
		})
	}
}
