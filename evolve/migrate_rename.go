package evolve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/store"
)

// PartitionMover is what RenamePartitionsMigration runs: fdblayer's
// Layer is one. It lists partitions as a PartitionLister does, and its
// MovePartitionPage moves up to limit rows of the partition whose
// identity is from to the one whose identity is to, in one engine
// transaction, never overwriting a row, and the wake time and due index
// entry with the page that finds from empty (more false).
type PartitionMover interface {
	PartitionLister
	MovePartitionPage(ctx context.Context, from, to []byte, limit int) (moved int, more bool, err error)
}

// RenameFunc says of a raw key of the store (after its root prefix)
// whether the partition identity it starts with is one to rename: how
// many bytes that identity takes (n), and the identity the partition
// moves to. ok is false for a key of a partition that keeps its identity.
// It must not modify key, and must answer alike for every key of a
// partition.
type RenameFunc func(key []byte) (n int, to []byte, ok bool)

// IntoNamespace returns the RenameFunc of the partitions a schema wrote
// before schemas had namespaces, when a partition identity was (variant
// tag, fields...): each moves to (namespace, variant tag, fields...), the
// identity the schema of namespace, linked into the program
// (codec/registry), now gives it. A key that starts with a null (the
// library's own partitions) or a string (a namespace) keeps its
// partition, as does one the schema's partition unions do not parse once
// the namespace is put before it. In a store several schemas wrote before
// namespaces, an identity may parse as more than one schema's: tell them
// apart in a RenameFunc of your own. It fails with an error wrapping
// registry.ErrNotLinked when no linked package declares namespace.
func IntoNamespace(namespace string) (RenameFunc, error) {
	s, ok := registry.Lookup(namespace)
	if !ok {
		return nil, fmt.Errorf("evolve: IntoNamespace: %w: %q", registry.ErrNotLinked, namespace)
	}
	ns := tuple.AppendString(nil, namespace)
	return func(key []byte) (int, []byte, bool) {
		if len(key) == 0 || key[0] == 0x00 || key[0] == 0x02 {
			return 0, nil, false
		}
		b := append(bytes.Clone(ns), key...)
		for _, u := range s.Partitions {
			if u.ParsePrefix == nil {
				continue
			}
			if _, n, err := u.ParsePrefix(b); err == nil && n > len(ns) {
				return n - len(ns), b[:n:n], true
			}
		}
		return 0, nil, false
	}, nil
}

// RenameConfig configures a RenamePartitionsMigration. A zero field takes
// its default.
type RenameConfig struct {
	// Name is the migration's name for ever (required, at most
	// MaxNameBytes).
	Name string
	// Rename says which partitions move, and where (required; IntoNamespace
	// for partitions written before namespaces).
	Rename RenameFunc
	// PageRows bounds the rows a page moves (default 100; a page also
	// stops at the store's MaxScanBytes).
	PageRows int
	// Logger logs regions left (default slog.Default()).
	Logger *slog.Logger
}

// DefaultRenamePageRows is a RenamePartitionsMigration page's rows unless
// RenameConfig.PageRows says otherwise.
const DefaultRenamePageRows = 100

// RenamePartitionsMigration returns the Migration that moves every
// partition cfg.Rename names to its new identity, partition by partition:
// each page one MovePartitionPage of l, an engine transaction (a move
// spans two partitions, so it cannot be one store batch), the last of a
// partition moving its wake time and due index entry. A page never
// overwrites a row of the new identity: a key present there fails the
// page, and the run, naming it. Keys no linked schema and no Rename
// splits, starting with neither a null nor a string (so perhaps an old
// identity Rename does not know), are regions it cannot reach: counted
// in Page.Left and logged.
//
// It must run with the partitions' writers stopped: a row written to an
// old identity after its last page stays there, unread, and a writer of
// a new identity may write a key the move would bring (see the
// CHANGELOG's procedure). It fails with store.ErrInvalid, naming the
// field, for a nil mover, a name empty or over MaxNameBytes, a nil Rename
// or a negative PageRows.
func RenamePartitionsMigration(l PartitionMover, cfg RenameConfig) (Migration, error) {
	invalid := func(format string, a ...any) error {
		return fmt.Errorf("%w: evolve: RenameConfig: %s", store.ErrInvalid, fmt.Sprintf(format, a...))
	}
	switch {
	case l == nil:
		return nil, fmt.Errorf("%w: evolve: RenamePartitionsMigration: nil PartitionMover", store.ErrInvalid)
	case cfg.Name == "" || len(cfg.Name) > MaxNameBytes:
		return nil, invalid("Name of %d bytes, want 1 to %d", len(cfg.Name), MaxNameBytes)
	case cfg.Rename == nil:
		return nil, invalid("Rename is nil")
	case cfg.PageRows < 0:
		return nil, invalid("PageRows %d is negative", cfg.PageRows)
	}
	if cfg.PageRows == 0 {
		cfg.PageRows = DefaultRenamePageRows
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &rename{l: l, cfg: cfg}, nil
}

type rename struct {
	l   PartitionMover
	cfg RenameConfig
}

func (m *rename) Name() string { return m.cfg.Name }

// split is the listing's Splitter: an identity Rename knows, else as
// SplitIdentity says.
func (m *rename) split(b []byte) (int, bool) {
	if n, _, ok := m.cfg.Rename(b); ok && n > 0 && n <= len(b) {
		return n, true
	}
	return SplitIdentity(b)
}

// Step implements Migration: one page of the partition the cursor names,
// or of the next one to rename. The cursor is a classCursor without a
// key.
func (m *rename) Step(ctx context.Context, cursor []byte) ([]byte, Page, error) {
	cur, err := parseClassCursor(cursor)
	if err != nil {
		return nil, Page{}, err
	}
	var page Page
	if cur.id == nil || cur.finished {
		id, left, err := m.next(ctx, cur.id)
		page.Left += left
		if err != nil || id == nil {
			return nil, page, err
		}
		cur = classCursor{id: id}
	}
	n, to, ok := m.cfg.Rename(cur.id)
	if !ok || n != len(cur.id) {
		return nil, page, fmt.Errorf("%w: Rename no longer renames partition %s", store.ErrInvalid, formatIdentity(cur.id))
	}
	moved, more, err := m.l.MovePartitionPage(ctx, cur.id, to, m.cfg.PageRows)
	if err != nil {
		return nil, page, fmt.Errorf("move %s to %s: %w", formatIdentity(cur.id), formatIdentity(to), err)
	}
	page.Rows, page.Rewritten, page.Partition = moved, moved, cur.id
	if !more {
		page.Partitions = 1
		cur.finished = true
	}
	return cur.encode(), page, nil
}

// next finds the first partition to rename after the partition after
// (nil: from the first), nil when there is none, and the regions it
// passed that may hold identities Rename does not know.
func (m *rename) next(ctx context.Context, after []byte) (id []byte, left int, err error) {
	err = m.l.ListIdentities(ctx, after, m.split, func(prefix []byte, whole bool) error {
		if !whole {
			if len(prefix) > 0 && prefix[0] != 0x00 && prefix[0] != 0x02 {
				left++
				m.cfg.Logger.Warn("evolve: migration: a region of keys neither Rename nor a linked schema tells apart is left",
					"migration", m.cfg.Name, "region", formatIdentity(prefix))
			}
			return nil
		}
		if n, _, ok := m.cfg.Rename(prefix); ok && n == len(prefix) {
			id = bytes.Clone(prefix)
			return errListed
		}
		return nil
	})
	if err != nil && !errors.Is(err, errListed) {
		return nil, left, fmt.Errorf("list partitions: %w", err)
	}
	return id, left, nil
}
