package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// An Identity addresses the rows of the partition whose AppendTuple wrote
// it, and prints as its tuple.
func TestIdentityAddressesThePartitionItNames(t *testing.T) {
	ctx := context.Background()
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	require.NoError(t, err)
	defer l.Close()
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("acme")}
	out, err := l.Apply(ctx, p, store.NewBatch().Put(store.Key("k"), store.Value("v")))
	require.NoError(t, err)
	require.True(t, out.Committed())

	raw, err := p.AppendTuple(nil)
	require.NoError(t, err)
	id, err := store.ParseIdentity(raw)
	require.NoError(t, err)
	of, err := store.IdentityOf(p)
	require.NoError(t, err)
	require.Equal(t, id, of)
	v, ok, err := l.Get(ctx, id, store.Key("k"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "v", string(v))
	require.Equal(t, `identity("refdomain", 2, "acme")`, store.PartitionName(id))
	require.Equal(t, store.IdentityKind, id.Kind())
}

func TestParseIdentityRejectsWhatNamesNoPartition(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown type code", []byte{0xfe, 0x01}},
		{"truncated string", []byte{0x02, 'a'}},
		{"truncated integer", []byte{0x16, 0x01}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.ParseIdentity(tc.b)
			require.ErrorIs(t, err, store.ErrCorrupt)
		})
	}
	_, err := store.Identity{}.AppendTuple(nil)
	require.ErrorIs(t, err, store.ErrInvalid, "the zero Identity")
}

// PartitionName prints a partition that is no fmt.Stringer as its kind
// and identity tuple.
func TestPartitionNameFallsBackToTheIdentityTuple(t *testing.T) {
	require.Equal(t, `plain("a", 7)`, store.PartitionName(plain{}))
}

type plain struct{}

func (plain) AppendTuple(dst []byte) ([]byte, error) {
	return append(dst, 0x02, 'a', 0x00, 0x15, 0x07), nil
}
func (plain) Kind() string { return "plain" }
