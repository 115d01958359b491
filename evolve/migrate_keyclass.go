package evolve

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// PartitionLister lists the partitions of a store: fdblayer's Layer is
// one (its ListIdentities). It calls fn with each partition holding a
// key, in identity order, after the partition or region after (nil: from
// the first): a partition's tuple identity with whole true, or with whole
// false the prefix of a region of keys split could not tell apart (a
// namespace no linked schema declares). split says where the identity at
// the start of a raw key ends (n bytes, ok true), or the prefix of the
// region to skip (ok false). It stops at fn's first error and returns it.
type PartitionLister interface {
	ListIdentities(ctx context.Context, after []byte, split func(b []byte) (n int, ok bool), fn func(prefix []byte, whole bool) error) error
}

// RewriteFunc says what a migration does with one stored row (key and
// value, the store's own bytes: it must not modify them): its key and
// value afterwards. format is the store's format of the migration's
// namespace. It returns:
//
//   - the same key and a new value: the row is rewritten;
//   - another key: the row moves there (with the value returned, or the
//     same); that key must lie outside the migration's range, and the move
//     never overwrites a row there;
//   - a nil value, or the same key and value: the row is kept;
//   - an error wrapping store.ErrNewerVersion (a newer schema wrote it),
//     store.ErrCorrupt or wire.ErrFormatTooOld (the store's format cannot
//     hold the row rewritten): the row is left as it is, counted and
//     logged; any other error stops the migration.
//
// It runs inside a store transaction, perhaps several times for one row:
// it must be quick and have no other effect.
type RewriteFunc func(key store.Key, value store.Value, format uint32) (store.Key, store.Value, error)

// Upgrade returns the RewriteFunc that rewrites a row of a value family
// in the newest version the store's format allows: decode (a generated
// XValues's Decode) reads any version as the newest, and encode (its
// Encode) writes it at the format. A row already in that version encodes
// to its own bytes and is kept; one of a newer version, or corrupt, is
// left (decode's error).
//
//	evolve.Upgrade(values.Decode, values.Encode) // values := ordersgen.NewOrderKeyValues(orders.Versions{})
func Upgrade[V any](decode func(b []byte) (V, error), encode func(v V, format uint32) ([]byte, error)) RewriteFunc {
	return func(key store.Key, value store.Value, format uint32) (store.Key, store.Value, error) {
		v, err := decode(value)
		if err != nil {
			return nil, nil, err
		}
		b, err := encode(v, format)
		if err != nil {
			return nil, nil, err
		}
		return key, b, nil
	}
}

// Retag returns the RewriteFunc that moves a row of key class tag from to
// tag to, the rest of its key and its value unchanged: a schema's class
// renumbered (tags below 100 are the library's). A key that is not of tag
// from is left as corrupt. Run it over TagRange(from).
func Retag(from, to uint64) RewriteFunc {
	return func(key store.Key, value store.Value, _ uint32) (store.Key, store.Value, error) {
		r := tuple.NewReader(key)
		tag, err := r.ReadUint()
		if err != nil || tag != from {
			return nil, nil, fmt.Errorf("%w: key %x is not of tag %d", store.ErrCorrupt, []byte(key), from)
		}
		return append(tuple.AppendUint(nil, to), key[r.Offset():]...), value, nil
	}
}

// TagRange returns the key range of the key class of tag: every key whose
// first tuple element is tag (a generated ClassRange's, for a tag no
// generated package declares any more).
func TagRange(tag uint64) (start, end store.Key) {
	s := tuple.AppendUint(nil, tag)
	return s, tuple.RangeEnd(s)
}

// KeyClassConfig configures a KeyClassMigration. A zero field takes its
// default.
type KeyClassConfig struct {
	// Name is the migration's name for ever (required, at most
	// MaxNameBytes): its checkpoint's key.
	Name string
	// Namespace is the schema whose partitions hold the rows (required):
	// the migration visits that namespace's partitions, and reads the
	// store's format of it. The library's namespace, gen.SchemaNamespace
	// ("mkit"), whose runtime rows any partition holds, visits every
	// partition.
	Namespace string
	// Start and End bound the rows of each partition the migration
	// rewrites, [Start, End): a key class's range (a generated ClassRange,
	// or TagRange).
	Start, End store.Key
	// Rewrite says what becomes of each row (required; see RewriteFunc).
	Rewrite RewriteFunc
	// Requires is the store format of Namespace the rewrite needs: a page
	// refuses to run, failing with wire.ErrFormatTooOld, while the store's
	// is lower (0 and 1: any).
	Requires uint32
	// PageRows bounds the rows a page reads (default DefaultPageRows).
	// A page also stops where its batch would pass the store's
	// MaxBatchOps less ReservedBatchOps (a rewrite costs 2, a move 4) or
	// its MaxBatchBytes, and its scan at MaxScanBytes: a page rewrites at
	// most 50 rows of a store of 100-operation batches, and reads up to
	// PageRows rows it keeps.
	PageRows int
	// Logger logs the rows and regions left (default slog.Default()).
	Logger *slog.Logger
}

// DefaultPageRows is the rows a KeyClassMigration page reads unless
// KeyClassConfig.PageRows says otherwise.
const DefaultPageRows = 256

// keyClass is KeyClassMigration's Migration.
type keyClass struct {
	s     store.Store
	parts PartitionLister
	cfg   KeyClassConfig
	ns    []byte // the namespace's tuple element; nil for the library's
	log   *slog.Logger
}

// KeyClassMigration returns the Migration that rewrites the rows of a key
// class (cfg.Start to cfg.End) in every partition of cfg.Namespace, which
// parts lists, partition by partition, in pages (see KeyClassConfig):
// each page one store.Transact of its partition that reads a page of rows
// and writes those Rewrite changes, each guarded on the value read (a
// move also on its new key's absence), so that a concurrent writer's
// change makes the page read again and is never overwritten; a page run
// again after a crash finds its rows rewritten and keeps them. Rows
// Rewrite leaves (newer, corrupt) are counted in Page.Left and logged, as
// are regions of partitions of the namespace no linked schema tells apart
// (codec/registry: link the schema's generated package). Partitions
// holding no row of the class cost a listing read and a scan each; a
// page visits up to 64 of them before the Runner checkpoints.
//
// The program links the schema of cfg.Namespace (its generated package),
// whose partition unions tell its partitions apart. Each page writes at
// the store's format of the namespace ([store.FormatOf]: a store that is
// no [store.Formats], as one without a gate, is at format 1).
//
// It fails with store.ErrInvalid, naming the field, for a nil store or
// lister, a name empty or over MaxNameBytes, an empty namespace or one no
// linked package declares (also registry.ErrNotLinked), an empty or
// inverted range, a nil Rewrite or a negative PageRows.
func KeyClassMigration(s store.Store, parts PartitionLister, cfg KeyClassConfig) (Migration, error) {
	invalid := func(format string, a ...any) error {
		return fmt.Errorf("%w: evolve: KeyClassConfig: %s", store.ErrInvalid, fmt.Sprintf(format, a...))
	}
	switch {
	case s == nil || parts == nil:
		return nil, fmt.Errorf("%w: evolve: KeyClassMigration: nil store or partition lister", store.ErrInvalid)
	case cfg.Name == "" || len(cfg.Name) > MaxNameBytes:
		return nil, invalid("Name of %d bytes, want 1 to %d", len(cfg.Name), MaxNameBytes)
	case cfg.Namespace == "":
		return nil, invalid("Namespace is empty")
	case len(cfg.Start) == 0 || bytes.Compare(cfg.Start, cfg.End) >= 0:
		return nil, invalid("range [%x, %x) is empty", []byte(cfg.Start), []byte(cfg.End))
	case cfg.Rewrite == nil:
		return nil, invalid("Rewrite is nil")
	case cfg.PageRows < 0:
		return nil, invalid("PageRows %d is negative", cfg.PageRows)
	}
	m := &keyClass{s: s, parts: parts, cfg: cfg, log: cfg.Logger}
	if cfg.Namespace != gen.SchemaNamespace {
		if _, ok := registry.Lookup(cfg.Namespace); !ok {
			return nil, fmt.Errorf("%w: evolve: KeyClassConfig: Namespace %q: %w (link its generated package: only its schema tells its partitions apart)",
				store.ErrInvalid, cfg.Namespace, registry.ErrNotLinked)
		}
		m.ns = tuple.AppendString(nil, cfg.Namespace)
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	return m, nil
}

func (m *keyClass) Name() string { return m.cfg.Name }

// maxQuietPartitions bounds the partitions one Step visits that hold no
// row of the class, so that a checkpoint records the progress of a long
// run of them.
const maxQuietPartitions = 64

// Step implements Migration: the next page of rows of the class, in the
// partition the cursor names or the next ones.
func (m *keyClass) Step(ctx context.Context, cursor []byte) ([]byte, Page, error) {
	cur, err := parseClassCursor(cursor)
	if err != nil {
		return nil, Page{}, err
	}
	format := store.FormatOf(m.s, m.cfg.Namespace)
	if m.cfg.Requires > 1 && format < m.cfg.Requires {
		return nil, Page{}, fmt.Errorf("%w: migration %q needs store format %d of namespace %q, the store's is %d: raise it first",
			wire.ErrFormatTooOld, m.cfg.Name, m.cfg.Requires, m.cfg.Namespace, format)
	}
	var page Page
	for visited := 0; ; visited++ {
		if cur.id == nil || cur.finished {
			id, left, err := m.next(ctx, cur.id)
			page.Left += left
			if err != nil {
				return nil, page, err
			}
			if id == nil {
				return nil, page, nil
			}
			cur = classCursor{id: id}
		}
		pg, last, exhausted, err := m.page(ctx, cur, format)
		if err != nil {
			return nil, page, err
		}
		page.add(pg)
		page.Partition = cur.id
		if exhausted {
			page.Partitions++
			cur = classCursor{id: cur.id, finished: true}
		} else {
			cur.last = last
		}
		if pg.Rows > 0 || visited+1 >= maxQuietPartitions {
			return cur.encode(), page, nil
		}
	}
}

// errListed stops a listing that found what it looked for.
var errListed = errors.New("evolve: listed")

// next finds the first partition of the namespace after the partition
// after (nil: from the first): its identity, nil when there is none,
// and the regions of the namespace's keys it passed that no linked schema
// tells apart, each logged.
func (m *keyClass) next(ctx context.Context, after []byte) (id []byte, left int, err error) {
	err = m.parts.ListIdentities(ctx, after, SplitIdentity, func(prefix []byte, whole bool) error {
		if m.ns != nil && !bytes.HasPrefix(prefix, m.ns) {
			if bytes.Compare(prefix, m.ns) > 0 {
				return errListed // past the namespace: identities are listed in order
			}
			return nil
		}
		if !whole {
			left++
			m.log.Warn("evolve: migration: a region of partitions no linked schema tells apart is left (link the schema's generated package)",
				"migration", m.cfg.Name, "region", formatIdentity(prefix))
			return nil
		}
		id = bytes.Clone(prefix)
		return errListed
	})
	if err != nil && !errors.Is(err, errListed) {
		return nil, left, fmt.Errorf("list partitions: %w", err)
	}
	return id, left, nil
}

// leftRow is a row a page left as it was.
type leftRow struct {
	key []byte
	err error
}

// page runs one page of the partition cur names, from its cursor: what it
// did, the key of the last row it went through, and whether it went
// through the partition's last row of the class.
func (m *keyClass) page(ctx context.Context, cur classCursor, format uint32) (page Page, last []byte, exhausted bool, err error) {
	p, err := store.ParseIdentity(cur.id)
	if err != nil {
		return Page{}, nil, false, err
	}
	start := m.cfg.Start
	if cur.last != nil {
		start = append(bytes.Clone(cur.last), 0x00) // the first key after it
	}
	if bytes.Compare(start, m.cfg.End) >= 0 {
		return Page{}, nil, true, nil
	}
	caps := m.s.Capabilities()
	opsBudget := caps.MaxBatchOps - caps.ReservedBatchOps
	limit := DefaultPageRows
	if m.cfg.PageRows > 0 {
		limit = m.cfg.PageRows
	}
	var (
		runs int
		left []leftRow
	)
	// plan is what becomes of one row read.
	type plan struct {
		row store.KeyValue
		nk  store.Key
		nv  store.Value
		err error // a row left
	}
	fn := func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		runs++
		page, last, exhausted, left = Page{}, nil, false, left[:0]
		pg, err := r.Scan(ctx, start, m.cfg.End, nil, limit)
		if err != nil {
			return nil, err
		}
		plans := make([]plan, len(pg.Entries))
		var targets []store.Key
		var moves []int
		for i, row := range pg.Entries {
			nk, nv, err := m.cfg.Rewrite(row.Key, row.Value, format)
			plans[i] = plan{row: row}
			switch {
			case err != nil && (errors.Is(err, store.ErrNewerVersion) || errors.Is(err, store.ErrCorrupt) || errors.Is(err, wire.ErrFormatTooOld)):
				plans[i].err = err
			case err != nil:
				return nil, fmt.Errorf("rewrite of key %x in %s: %w", []byte(row.Key), store.PartitionName(p), err)
			case nv == nil || bytes.Equal(nk, row.Key) && bytes.Equal(nv, row.Value):
				// kept
			case bytes.Equal(nk, row.Key):
				plans[i].nk, plans[i].nv = nk, nv
			default:
				if bytes.Compare(nk, m.cfg.Start) >= 0 && bytes.Compare(nk, m.cfg.End) < 0 {
					return nil, fmt.Errorf("%w: the rewrite of key %x moves it to %x, inside the migration's range, where it would be met again",
						store.ErrInvalid, []byte(row.Key), []byte(nk))
				}
				plans[i].nk, plans[i].nv = nk, nv
				targets = append(targets, nk)
				moves = append(moves, i)
			}
		}
		if len(targets) > 0 {
			// A move never overwrites: a row whose new key holds one is
			// left (and the batch guards the others' absence).
			vals, err := r.GetMany(ctx, targets)
			if err != nil {
				return nil, err
			}
			for j, v := range vals {
				if v != nil {
					i := moves[j]
					plans[i].err = fmt.Errorf("its new key %x holds a row already", []byte(plans[i].nk))
				}
			}
		}
		b := store.NewBatch()
		done := 0
	rows:
		for _, pl := range plans {
			row := pl.row
			var ops, size int
			switch {
			case pl.err != nil:
				left = append(left, leftRow{key: row.Key, err: pl.err})
			case pl.nk == nil:
				// kept
			case bytes.Equal(pl.nk, row.Key):
				ops, size = 2, 2*len(row.Key)+len(row.Value)+len(pl.nv)
			default:
				ops, size = 4, 2*len(row.Key)+len(row.Value)+2*len(pl.nk)+len(pl.nv)
			}
			if ops > 0 {
				if b.Ops()+ops > opsBudget || b.Bytes()+size > caps.MaxBatchBytes {
					if done == 0 {
						return nil, fmt.Errorf("%w: the rewrite of key %x in %s does not fit one batch", store.ErrInvalid, []byte(row.Key), store.PartitionName(p))
					}
					break rows
				}
				b.Require(store.Equals(row.Key, row.Value))
				if !bytes.Equal(pl.nk, row.Key) {
					b.Require(store.Absent(pl.nk)).Put(pl.nk, pl.nv).Delete(row.Key)
				} else {
					b.Put(row.Key, pl.nv)
				}
				page.Rewritten++
			}
			page.Rows++
			last = row.Key
			done++
		}
		exhausted = done == len(plans) && pg.Next == nil
		page.Left = len(left)
		return b, nil
	}
	if _, err := store.Transact(ctx, m.s, p, fn, store.TransactConfig{}); err != nil {
		return Page{}, nil, false, err
	}
	page.Conflicts = max(runs-1, 0)
	for _, l := range left {
		m.log.Warn("evolve: migration left a row as it was", "migration", m.cfg.Name,
			"partition", store.PartitionName(p), "key", fmt.Sprintf("%x", l.key), "error", l.err)
	}
	return page, bytes.Clone(last), exhausted, nil
}

// classCursor is a KeyClassMigration's position: a partition, and the
// last key of the class a page went through in it (nil: none yet), or
// the partition finished.
//
// Layout, version 1: 0x01 | finished (0 or 1) | uvarint length of the
// identity | identity | last key (the rest; empty: none).
type classCursor struct {
	id       []byte
	last     []byte
	finished bool
}

const classCursorV1 = 0x01

func (c classCursor) encode() []byte {
	b := []byte{classCursorV1, 0}
	if c.finished {
		b[1] = 1
	}
	b = binary.AppendUvarint(b, uint64(len(c.id)))
	b = append(b, c.id...)
	return append(b, c.last...)
}

// parseClassCursor parses a cursor classCursor.encode wrote (nil: the
// start). A cursor is stored data: anything else is store.ErrCorrupt.
func parseClassCursor(b []byte) (classCursor, error) {
	if len(b) == 0 {
		return classCursor{}, nil
	}
	bad := func(why string) (classCursor, error) {
		return classCursor{}, fmt.Errorf("%w: migration cursor %x: %s", store.ErrCorrupt, b, why)
	}
	if b[0] != classCursorV1 {
		return bad("unknown version")
	}
	if len(b) < 3 || b[1] > 1 {
		return bad("truncated or bad flag")
	}
	n, k := binary.Uvarint(b[2:])
	if k <= 0 || n == 0 || n > uint64(len(b)-2-k) {
		return bad("bad identity length")
	}
	id := b[2+k : 2+k+int(n)]
	if _, err := store.ParseIdentity(id); err != nil {
		return bad(err.Error())
	}
	c := classCursor{id: bytes.Clone(id), finished: b[1] == 1}
	if rest := b[2+k+int(n):]; len(rest) > 0 {
		if c.finished {
			return bad("a key after a finished partition")
		}
		c.last = bytes.Clone(rest)
	}
	return c, nil
}

// SplitIdentity says where the partition identity at the start of a raw
// key (after a Layer's root) ends, as fdblayer.Splitter does: the
// library's own partitions, (null, "mkitfdb", name), and those of the
// linked schemas (codec/registry); where none tells, the namespace (with
// the variant tag after it, when its schema is linked) as the prefix of a
// region, or the key's first byte when it starts with no namespace. The
// migrations and the operator's command list partitions with it.
func SplitIdentity(b []byte) (int, bool) {
	r := tuple.NewReader(b)
	if len(b) > 0 && b[0] == 0x00 {
		if r.ReadNull() == nil {
			if _, err := r.ReadString(); err == nil {
				if _, err := r.ReadString(); err == nil {
					return r.Offset(), true
				}
			}
		}
		return 1, false
	}
	_, _, n, _, err := registry.IdentityPrefix(b)
	if err == nil {
		return n, true
	}
	r = tuple.NewReader(b)
	if _, err := r.ReadString(); err != nil {
		return 1, false
	}
	n = r.Offset()
	if errors.Is(err, registry.ErrNotLinked) {
		return n, false
	}
	if _, err := r.ReadUint(); err == nil {
		n = r.Offset()
	}
	return n, false
}

// formatIdentity prints a tuple identity or prefix: ("orders", 2, "ada"),
// x:HEX when it does not decode, "-" when nil.
func formatIdentity(b []byte) string {
	if b == nil {
		return "-"
	}
	t, err := tuple.Unpack(b)
	if err != nil || len(t) == 0 {
		return fmt.Sprintf("x:%x", b)
	}
	return t.String()
}
