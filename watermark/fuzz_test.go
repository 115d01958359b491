package watermark_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/dispatch/dispatchgen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// FuzzDecode: DecodeCheckpoint never panics; every input it accepts
// encodes back to the same bytes; every input it refuses fails with
// ErrCheckpoint (so store.ErrInvalid), never store.ErrCorrupt.
func FuzzDecode(f *testing.F) {
	full := validRecord(f)
	bare := full
	bare.Recovery, bare.Reconcile = nil, nil
	activation := full
	activation.Recovery = recoveryOf(f, dispatchgen.RestoreV1{Initial: true, RestoredAtMs: 5, Backup: "first"})
	activation.MinimumMs = activation.CeilingMs
	for _, r := range []gen.WatermarkCheckpoint{full, bare, activation} {
		b := encodeRecord(f, r)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		cp, err := table.DecodeCheckpoint(b)
		if !bytes.Equal(in, b) {
			t.Fatalf("DecodeCheckpoint modified its input")
		}
		if err != nil {
			if cp != nil || !errors.Is(err, watermark.ErrCheckpoint) || !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("DecodeCheckpoint(%x) = %v, %v; want nil and an error wrapping ErrCheckpoint alone", b, cp, err)
			}
			return
		}
		again, err := cp.Encode()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("DecodeCheckpoint(%x) re-encodes to %x, %v", b, again, err)
		}
		if cp.Minimum().After(cp.Ceiling()) {
			t.Fatalf("accepted minimum %v above ceiling %v", cp.Minimum(), cp.Ceiling())
		}
	})
}
