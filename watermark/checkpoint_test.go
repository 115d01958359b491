package watermark_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/dispatch/dispatchgen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// identity is p's tuple identity.
func identity(t testing.TB, p store.Partition) []byte {
	t.Helper()
	b, err := p.AppendTuple(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// validRecord is a checkpoint record DecodeCheckpoint accepts: both markers present.
func validRecord(t testing.TB) gen.WatermarkCheckpoint {
	return gen.WatermarkCheckpoint{
		Coordinator: identity(t, coordinator),
		CeilingMs:   100,
		MinimumMs:   40,
		Recovery:    recovery(t, 90),
		Reconcile:   reconciled(t, 91),
		Cursor:      []byte{1, 2, 3},
	}
}

func encodeRecord(t testing.TB, r gen.WatermarkCheckpoint) []byte {
	t.Helper()
	b, err := gen.EncodeWatermarkCheckpoint(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeRejectsEachProblemByName: every way a checkpoint's bytes can
// be wrong fails DecodeCheckpoint with ErrCheckpoint (so store.ErrInvalid, not
// store.ErrCorrupt: the bytes are the caller's) and a message naming the
// reason.
func TestDecodeRejectsEachProblemByName(t *testing.T) {
	valid := encodeRecord(t, validRecord(t))
	with := func(change func(r *gen.WatermarkCheckpoint)) []byte {
		r := validRecord(t)
		change(&r)
		return encodeRecord(t, r)
	}
	// The record's encoder refuses a minimum above the ceiling, so that
	// case patches the bytes: the minimum is the 8 bytes after the
	// ceiling, which follow the version and the prefixed identity.
	aboveCeiling := bytes.Clone(valid)
	at := 1 + 1 + len(identity(t, coordinator)) + 8
	binary.BigEndian.PutUint64(aboveCeiling[at:], 101)

	cases := []struct {
		name string
		in   []byte
		says []string
	}{
		{"empty", nil, []string{"version", "truncated"}},
		{"wrong version", append([]byte{3}, valid[1:]...), []string{"unknown version 3 (want 2)"}},
		{"the reference's version 1", append([]byte{1}, valid[1:]...), []string{"unknown version 1 (want 2)"}},
		{"truncated", valid[:len(valid)-1], []string{"Cursor", "truncated"}},
		{"truncated in the ceiling", valid[:at-4], []string{"CeilingMs", "truncated"}},
		{"trailing bytes", append(bytes.Clone(valid), 0), []string{"1 trailing bytes"}},
		{"minimum above ceiling", aboveCeiling, []string{"MinimumMs", "101 over CeilingMs 100"}},
		{"undecodable coordinator", with(func(r *gen.WatermarkCheckpoint) { r.Coordinator = []byte{0x02, 'x'} }), []string{"coordinator identity"}},
		{"coordinator of another schema", with(func(r *gen.WatermarkCheckpoint) {
			r.Coordinator = tuple.AppendUint(tuple.AppendString(nil, "shop"), 1)
		}), []string{"coordinator identity", `namespace "shop"`}},
		{"another partition kind", with(func(r *gen.WatermarkCheckpoint) {
			r.Coordinator = identity(t, queue(7))
		}), []string{"names queue(north,7), not a coordinator partition"}},
		{"undecodable recovery marker", with(func(r *gen.WatermarkCheckpoint) { r.Recovery = []byte("corrupt marker") }), []string{"recovery marker", "RestoreV1"}},
		{"empty recovery marker", with(func(r *gen.WatermarkCheckpoint) { r.Recovery = []byte{} }), []string{"recovery marker", "truncated"}},
		{"undecodable reconcile marker", with(func(r *gen.WatermarkCheckpoint) { r.Reconcile = []byte{1, 2} }), []string{"reconcile marker", "U64Value"}},
		{"empty cursor", with(func(r *gen.WatermarkCheckpoint) { r.Cursor = []byte{} }), []string{"empty cursor"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cp, err := table.DecodeCheckpoint(c.in)
			if cp != nil {
				t.Fatalf("DecodeCheckpoint accepted %x", c.in)
			}
			requireErr(t, err, []error{watermark.ErrCheckpoint, store.ErrInvalid}, c.says...)
			if errors.Is(err, store.ErrCorrupt) {
				t.Errorf("error %q wraps store.ErrCorrupt: a checkpoint is input, not stored data", err)
			}
		})
	}
}

// TestCheckpointRoundTrips: a checkpoint Step returned, with the markers
// present and absent, encodes to bytes that decode to the same
// checkpoint and encode to the same bytes, and it resumes the scan.
func TestCheckpointRoundTrips(t *testing.T) {
	cases := []struct {
		name    string
		markers *store.Batch
		want    watermark.Generation
	}{
		{"no markers", nil, watermark.Generation{}},
		{"recovery reconciled", store.NewBatch().Put(recoveryKey, recovery(t, 90)).Put(reconcileKey, reconciled(t, 91)),
			watermark.Generation{Recovery: recovery(t, 90), Reconcile: reconciled(t, 91)}},
		{"reconcile marker alone", store.NewBatch().Put(reconcileKey, reconciled(t, 7)),
			watermark.Generation{Reconcile: reconciled(t, 7)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testengine.Memory)
			e.putLease(t, 0, 40, 200)
			e.putLease(t, 1, 90, 200)
			if c.markers != nil {
				e.apply(t, coordinator, c.markers)
			}
			first := e.mustPending(t, t0.Add(100*time.Millisecond), nil, 1)
			if !first.Generation().Equal(c.want) {
				t.Fatalf("generation %+v; want %+v", first.Generation(), c.want)
			}
			encoded := mustEncode(t, first)
			decoded := mustDecode(t, encoded)
			again, err := decoded.Encode()
			if err != nil || !bytes.Equal(again, encoded) {
				t.Fatalf("re-encoded %x, %v; want %x", again, err, encoded)
			}
			if decoded.Coordinator() != coordinator || !decoded.Ceiling().Equal(t0.Add(100*time.Millisecond)) || !decoded.Minimum().Equal(t0.Add(40*time.Millisecond)) || !decoded.Generation().Equal(c.want) {
				t.Fatalf("decoded %s %v %v %+v; want %s, 100ms and 40ms after the epoch, %+v", decoded.Coordinator(), decoded.Ceiling(), decoded.Minimum(), decoded.Generation(), coordinator, c.want)
			}
			encoded[len(encoded)-1] ^= 0xff // DecodeCheckpoint kept no alias of its input
			if got := e.mustComplete(t, t0.Add(300*time.Millisecond), decoded, 1); !got.Equal(t0.Add(40 * time.Millisecond)) {
				t.Fatalf("resumed watermark %v; want 40ms after the epoch", got)
			}
		})
	}
}

// TestGenerationEqualTellsAbsentFromEmpty: markers compare byte for byte,
// and an absent marker is not an empty one.
func TestGenerationEqualTellsAbsentFromEmpty(t *testing.T) {
	cases := []struct {
		name string
		a, b watermark.Generation
		want bool
	}{
		{"both absent", watermark.Generation{}, watermark.Generation{}, true},
		{"same bytes", watermark.Generation{Recovery: []byte{1}, Reconcile: []byte{2}}, watermark.Generation{Recovery: []byte{1}, Reconcile: []byte{2}}, true},
		{"absent and empty recovery", watermark.Generation{}, watermark.Generation{Recovery: []byte{}}, false},
		{"absent and empty reconcile", watermark.Generation{Reconcile: []byte{}}, watermark.Generation{}, false},
		{"other recovery bytes", watermark.Generation{Recovery: []byte{1}}, watermark.Generation{Recovery: []byte{2}}, false},
		{"other reconcile bytes", watermark.Generation{Reconcile: []byte{1}}, watermark.Generation{Reconcile: []byte{1, 0}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.a.Equal(c.b) != c.want || c.b.Equal(c.a) != c.want {
				t.Fatalf("%+v.Equal(%+v) = %v; want %v both ways", c.a, c.b, c.a.Equal(c.b), c.want)
			}
		})
	}
}

// TestZeroCheckpoint: the zero Checkpoint neither encodes nor resumes.
func TestZeroCheckpoint(t *testing.T) {
	var zero checkpoint
	_, err := zero.Encode()
	requireErr(t, err, []error{watermark.ErrCheckpoint}, "zero Checkpoint")
	e := newEnv(t, testengine.Memory)
	e.putLease(t, 0, 40, 200)
	_, _, err = e.step(t0.Add(100*time.Millisecond), &zero, 1)
	requireErr(t, err, []error{watermark.ErrCheckpoint, store.ErrInvalid}, "the zero Checkpoint")
}

// longCursors is a store whose scan cursors are longer than a checkpoint
// carries: the inner store's, padded.
type longCursors struct{ store.Store }

func (s longCursors) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	page, err := s.Store.Scan(ctx, p, start, end, after, limit)
	if page.Next != nil {
		page.Next = append(page.Next, make([]byte, 4096)...)
	}
	return page, err
}

// TestEncodeRefusesACursorOverItsBound: a checkpoint of a store cursor
// longer than the record's 4,096 bytes cannot be carried; Encode says so.
func TestEncodeRefusesACursorOverItsBound(t *testing.T) {
	e := newEnv(t, testengine.Memory)
	e.putLease(t, 0, 40, 200)
	e.putLease(t, 1, 90, 200)
	cp, _, err := table.Step(e.ctx, longCursors{e.s}, coordinator, t0.Add(100*time.Millisecond), nil, 1)
	if err != nil || cp == nil {
		t.Fatalf("step: %v, %v", cp, err)
	}
	b, err := cp.Encode()
	if b != nil {
		t.Fatalf("encoded a checkpoint of a %d-byte cursor", 4096+len(leaseKey(0)))
	}
	requireErr(t, err, []error{store.ErrInvalid}, "WatermarkCheckpoint.Cursor")
}

// TestStepRefusesACheckpointOfAnotherCoordinator: a checkpoint resumes the
// scan of its own coordinator only, refused before any read.
func TestStepRefusesACheckpointOfAnotherCoordinator(t *testing.T) {
	e := newEnv(t, testengine.Memory)
	e.putLease(t, 0, 40, 200)
	e.putLease(t, 1, 90, 200)
	cp := carried(t, e.mustPending(t, t0.Add(100*time.Millisecond), nil, 1))
	other := dispatchgen.DispatcherPartition{Region: dispatchgen.MustRegion("south")}
	reads := e.s.Calls(storetest.MethodGetMany) + e.s.Calls(storetest.MethodScan)
	_, _, err := table.Step(e.ctx, e.s, other, t0.Add(150*time.Millisecond), cp, 1)
	requireErr(t, err, []error{store.ErrInvalid, watermark.ErrCheckpoint}, "dispatcher(north)", "not dispatcher(south)")
	if e.s.Calls(storetest.MethodGetMany)+e.s.Calls(storetest.MethodScan) != reads {
		t.Fatal("a checkpoint of another coordinator reached the store")
	}
}
