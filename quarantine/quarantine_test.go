package quarantine_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

var (
	t0   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	note = quarantine.Note{At: t0, Who: "oncall", Reason: "poison"}
	row  = store.Key("\x15\x10row")
	comp = store.Key("\x15\x07companion")
)

type env struct {
	ctx context.Context
	s   store.Store
	p   store.Partition
}

func newEnv(t *testing.T) *env {
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return &env{ctx: context.Background(), s: l, p: refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("tenant")}}
}

func (e *env) r() store.Reader { return store.ReaderOf(e.s, e.p) }

func (e *env) apply(t *testing.T, b *store.Batch) bool {
	t.Helper()
	out, err := e.s.Apply(e.ctx, e.p, b)
	require.NoError(t, err)
	return out.Committed()
}

// rows returns every row of the partition, as key=value text.
func (e *env) rows(t *testing.T) string {
	t.Helper()
	page, err := e.s.Scan(e.ctx, e.p, store.Key{0x00}, store.Key{0xFF}, nil, 100)
	require.NoError(t, err)
	var sb strings.Builder
	for _, kv := range page.Entries {
		sb.WriteString(string(kv.Key) + "=" + string(kv.Value) + "\n")
	}
	return sb.String()
}

// TestMoveAndRestoreRoundTrip: a row and its companion move aside with the
// note and the backlog drop, are gone from their keys, Read returns them
// as moved, and Restore puts back exactly what was there.
func TestMoveAndRestoreRoundTrip(t *testing.T) {
	e := newEnv(t)
	require.True(t, e.apply(t, store.NewBatch().Put(row, []byte("value")).Put(comp, []byte("cv"))))
	before := e.rows(t)

	b := store.NewBatch()
	require.NoError(t, quarantine.Move(e.ctx, e.r(), b, quarantine.Entry{Note: note, Key: row, Value: []byte("value"),
		Companion: comp, CompanionValue: []byte("cv"), BacklogRows: 1, BacklogBytes: 12}))
	require.True(t, e.apply(t, b))
	for _, k := range []store.Key{row, comp} {
		_, ok, err := e.s.Get(e.ctx, e.p, k)
		require.NoError(t, err)
		assert.False(t, ok, "%q is still at its key", k)
	}

	got, err := quarantine.Read(e.ctx, e.r(), row)
	require.NoError(t, err)
	assert.True(t, got.At.Equal(t0), "quarantined at %v", got.At)
	assert.Equal(t, [2]string{note.Who, note.Reason}, [2]string{got.Who, got.Reason})
	assert.Equal(t, row, got.Key)
	assert.Equal(t, store.Value("value"), got.Value)
	assert.Equal(t, comp, got.Companion)
	assert.Equal(t, store.Value("cv"), got.CompanionValue)
	assert.Equal(t, [2]uint64{1, 12}, [2]uint64{got.BacklogRows, got.BacklogBytes})
	rk, _, err := quarantine.Keys(row)
	require.NoError(t, err)
	rec, _, err := e.s.Get(e.ctx, e.p, rk)
	require.NoError(t, err)
	assert.Equal(t, rec, got.Record(), "Record is the record's stored value")

	b = store.NewBatch()
	require.NoError(t, quarantine.Restore(e.ctx, e.r(), b, got))
	require.True(t, e.apply(t, b))
	assert.Equal(t, before, e.rows(t), "the partition after restore")
}

// TestMoveRefusesAKeyQuarantinedAlready: a row written again at a
// quarantined key is refused, and nothing is added to the batch.
func TestMoveRefusesAKeyQuarantinedAlready(t *testing.T) {
	e := newEnv(t)
	require.True(t, e.apply(t, store.NewBatch().Put(row, []byte("value"))))
	b := store.NewBatch()
	require.NoError(t, quarantine.Move(e.ctx, e.r(), b, quarantine.Entry{Note: note, Key: row, Value: []byte("value")}))
	require.True(t, e.apply(t, b))
	require.True(t, e.apply(t, store.NewBatch().Put(row, []byte("again"))))

	b = store.NewBatch().Put(store.Key("other"), []byte("x"))
	err := quarantine.Move(e.ctx, e.r(), b, quarantine.Entry{Note: note, Key: row, Value: []byte("again")})
	require.ErrorIs(t, err, quarantine.ErrQuarantined)
	assert.Len(t, b.Writes, 1, "a refused move adds nothing")
	assert.Empty(t, b.Preconditions)
}

// TestMoveIsGuardedOnTheRowAsRead: a row that changes between the read
// and the batch fails the batch whole.
func TestMoveIsGuardedOnTheRowAsRead(t *testing.T) {
	e := newEnv(t)
	require.True(t, e.apply(t, store.NewBatch().Put(row, []byte("value")).Put(comp, []byte("cv"))))
	for _, k := range []store.Key{row, comp} {
		b := store.NewBatch()
		require.NoError(t, quarantine.Move(e.ctx, e.r(), b, quarantine.Entry{Note: note, Key: row, Value: []byte("value"), Companion: comp, CompanionValue: []byte("cv")}))
		before := e.rows(t)
		require.True(t, e.apply(t, store.NewBatch().Put(k, []byte("changed"))))
		changed := e.rows(t)
		assert.NotEqual(t, before, changed)
		assert.False(t, e.apply(t, b), "the move applied over a changed %q", k)
		assert.Equal(t, changed, e.rows(t), "a failed move wrote")
		require.True(t, e.apply(t, store.NewBatch().Put(row, []byte("value")).Put(comp, []byte("cv"))))
	}
}

// TestMoveRefusesWhatTheRecordCannotHold: bad input fails with
// store.ErrInvalid and adds nothing.
func TestMoveRefusesWhatTheRecordCannotHold(t *testing.T) {
	e := newEnv(t)
	long := store.Key(bytes.Repeat([]byte{'k'}, 10_001))
	for name, entry := range map[string]quarantine.Entry{
		"no key":            {Note: note, Value: []byte("v")},
		"no value":          {Note: note, Key: row},
		"a key too long":    {Note: note, Key: long, Value: []byte("v")},
		"who too long":      {Note: quarantine.Note{At: t0, Who: strings.Repeat("w", quarantine.MaxWho+1)}, Key: row, Value: []byte("v")},
		"reason too long":   {Note: quarantine.Note{At: t0, Reason: strings.Repeat("r", quarantine.MaxReason+1)}, Key: row, Value: []byte("v")},
		"before the epoch":  {Note: quarantine.Note{At: time.Unix(-1, 0)}, Key: row, Value: []byte("v")},
		"companion too big": {Note: note, Key: row, Value: []byte("v"), Companion: comp, CompanionValue: bytes.Repeat([]byte{1}, gen.MaxQuarantineV1CompanionValue+1)},
	} {
		t.Run(name, func(t *testing.T) {
			b := store.NewBatch()
			err := quarantine.Move(e.ctx, e.r(), b, entry)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Empty(t, b.Writes)
			assert.Empty(t, b.Preconditions)
		})
	}
}

// TestReadAndRestoreRefusals: nothing quarantined, a corrupt record, a
// missing value row, a row back at the key or the companion's, and an
// entry Read did not return are each refused with their error, adding
// nothing.
func TestReadAndRestoreRefusals(t *testing.T) {
	e := newEnv(t)
	_, err := quarantine.Read(e.ctx, e.r(), row)
	require.ErrorIs(t, err, quarantine.ErrNotQuarantined)

	require.True(t, e.apply(t, store.NewBatch().Put(row, []byte("value")).Put(comp, []byte("cv"))))
	b := store.NewBatch()
	require.NoError(t, quarantine.Move(e.ctx, e.r(), b, quarantine.Entry{Note: note, Key: row, Value: []byte("value"), Companion: comp, CompanionValue: []byte("cv")}))
	require.True(t, e.apply(t, b))
	got, err := quarantine.Read(e.ctx, e.r(), row)
	require.NoError(t, err)

	for _, k := range []store.Key{row, comp} {
		require.True(t, e.apply(t, store.NewBatch().Put(k, []byte("back"))))
		b := store.NewBatch()
		err := quarantine.Restore(e.ctx, e.r(), b, got)
		require.ErrorIs(t, err, quarantine.ErrOccupied)
		var occ *quarantine.OccupiedError
		require.ErrorAs(t, err, &occ)
		assert.Equal(t, k, occ.Key)
		assert.Equal(t, store.Value("back"), occ.Value)
		assert.Empty(t, b.Writes)
		require.True(t, e.apply(t, store.NewBatch().Delete(k)))
	}
	err = quarantine.Restore(e.ctx, e.r(), store.NewBatch(), quarantine.Entry{Key: row, Value: []byte("value")})
	require.ErrorIs(t, err, store.ErrInvalid, "an entry Read did not return")

	// The record changes after Read: the restore's batch fails.
	b = store.NewBatch()
	require.NoError(t, quarantine.Restore(e.ctx, e.r(), b, got))
	rk, vk, err := quarantine.Keys(row)
	require.NoError(t, err)
	require.True(t, e.apply(t, store.NewBatch().Put(vk, []byte("other"))))
	assert.False(t, e.apply(t, b), "a restore applied over a changed quarantine value")

	require.True(t, e.apply(t, store.NewBatch().Delete(vk)))
	_, err = quarantine.Read(e.ctx, e.r(), row)
	require.ErrorIs(t, err, store.ErrCorrupt, "a record without its value row")
	require.True(t, e.apply(t, store.NewBatch().Put(rk, []byte{0xEE}).Put(vk, []byte("value"))))
	_, err = quarantine.Read(e.ctx, e.r(), row)
	require.ErrorIs(t, err, store.ErrCorrupt, "a record that does not decode")
	assert.False(t, errors.Is(err, quarantine.ErrNotQuarantined))
}
