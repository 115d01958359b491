package fdblayer

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

// Cursor byte layout, version 1:
//
//	0x01 | check (8 bytes, big-endian) | last key (1 or more bytes)
//
// The last key is the user key of the page's last row; the scan resumes
// strictly after it. check is the 64-bit FNV-1a hash of the version byte
// and, each preceded by its 4-byte big-endian length, the partition's
// subspace (root prefix and identity), the scan's start and end, and the
// last key. It binds the cursor to the partition and range it was issued
// for and catches truncation and garbling; it is not a secret (a caller
// forging one can only reach its own partition's range). The layout is
// stable: a released version keeps its bytes, later versions get a new
// first byte. Cursors survive restarts: the hash has no per-process seed.
const (
	cursorV1     = 0x01
	cursorHeader = 1 + 8
)

// appendCursor appends a version-1 cursor resuming after last.
func appendCursor(dst, sub, start, end, last []byte) []byte {
	dst = append(dst, cursorV1)
	dst = binary.BigEndian.AppendUint64(dst, cursorCheck(sub, start, end, last))
	return append(dst, last...)
}

// parseCursor returns the last key of c, a cursor issued for subspace sub
// and range [start, end). It fails with store.ErrInvalid for a cursor that
// is truncated, of an unknown version, issued for another partition or
// range, garbled, or whose last key lies outside the range.
func parseCursor(c store.Cursor, sub, start, end []byte) ([]byte, error) {
	if len(c) < cursorHeader+1 {
		return nil, fmt.Errorf("%w: cursor of %d bytes is truncated", store.ErrInvalid, len(c))
	}
	if c[0] != cursorV1 {
		return nil, fmt.Errorf("%w: cursor version %#x is unknown", store.ErrInvalid, c[0])
	}
	last := c[cursorHeader:]
	if binary.BigEndian.Uint64(c[1:cursorHeader]) != cursorCheck(sub, start, end, last) {
		return nil, fmt.Errorf("%w: cursor was issued for another partition or range, or is garbled", store.ErrInvalid)
	}
	if bytes.Compare(last, start) < 0 || (len(end) > 0 && bytes.Compare(last, end) >= 0) {
		return nil, fmt.Errorf("%w: cursor position lies outside its range", store.ErrInvalid)
	}
	return last, nil
}

// FNV-1a, 64-bit.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func cursorCheck(sub, start, end, last []byte) uint64 {
	h := uint64(fnvOffset)
	h = (h ^ cursorV1) * fnvPrime
	for _, part := range [...][]byte{sub, start, end, last} {
		n := uint32(len(part))
		for shift := 24; shift >= 0; shift -= 8 {
			h = (h ^ uint64(byte(n>>shift))) * fnvPrime
		}
		for _, b := range part {
			h = (h ^ uint64(b)) * fnvPrime
		}
	}
	return h
}
