package evolve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// DefaultRefresh is how often a Gate reads the store's formats again and
// renews its process row, unless GateConfig.Refresh says otherwise. A
// process row is live for four refreshes: a process that ends without
// closing its gate stops holding back raises that long after.
const DefaultRefresh = 10 * time.Second

// leaseRefreshes is how many refreshes a process row stays live for.
const leaseRefreshes = 4

// maxExpiredDeletes bounds the expired process rows one refresh deletes.
const maxExpiredDeletes = 16

// GateConfig configures a Gate (see OpenGate). A zero field takes its
// default; OpenGate fails with an error wrapping store.ErrInvalid, naming
// the field, for a field out of its range.
type GateConfig struct {
	// Process names this process in its row: unique among the processes
	// that share the store, at most gen.MaxProcessKeyProcess bytes.
	// Default: host:pid, and host:pid#N for the N-th gate a process
	// opens. A row of the same name left live by a process that ended
	// without closing its gate is taken over (and logged).
	Process string
	// Binary describes the program in the process row, at most
	// gen.MaxProcessV1Binary bytes (cut at a rune). Default: the
	// executable's name and its main module's path and version.
	Binary string
	// Known lowers, per namespace this binary links, the newest format
	// the gate claims to know below the linked package's
	// (registry.Schema.Format), so that a test stands for an older binary
	// on the store a newer one shares. Each entry names a linked namespace
	// and a format from 1 to the linked package's; nil means the linked
	// packages' own. A binary only ever claims to know less than it reads.
	Known map[string]uint32
	// ReadOnly makes a gate that only checks: it reads the store's formats
	// at open (refusing a store newer than the binary, as any gate) and
	// writes nothing of its own, no process row and no refresh, so raises
	// do not wait for the process; with no refresh, only a Sync
	// that reads a format raised past what it knows fences it. It is for a
	// process that never writes (an operator's view), or writes for
	// moments only what every binary of the formats it checked reads (an
	// operator's repair: a row an older binary writes, a newer one reads).
	ReadOnly bool
	// NewStore says the store holds no row yet: each linked namespace
	// without a format row starts at the format this binary knows, which
	// the gate records, rather than at 1, so that a store created by this
	// binary has every feature it knows from the start. fdblayer.Open sets
	// it when its engine holds nothing under the Layer's root, and refuses
	// it set by the caller. Ignored with ReadOnly.
	NewStore bool
	// Refresh is how often the gate reads the store's formats again and
	// renews its process row in the background (default DefaultRefresh;
	// negative is invalid). The process row is live for four refreshes.
	Refresh time.Duration
	// Clock dates the process row and the raises (default: the real
	// clock). The refresh's period is real time.
	Clock clock.Clock
	// Logger logs a takeover, a failed refresh, and, once a refresh, a
	// store whose format was raised past what this binary knows
	// (default: slog.Default()).
	Logger *slog.Logger
}

// linked is a namespace this binary links: the newest format it knows
// and the package that declares it.
type linked struct {
	format     uint32
	importPath string
}

// Gate is a process's view of a store's formats: the format of each
// namespace, which writers write at (Format), checked against what the
// binary knows when the gate opens and at every refresh, and the process's
// row, which tells raises what the process knows. A gate that sees a
// namespace's format raised past what its binary knows (a process that
// slept through a raise) fences the store: Fenced returns the error every
// write must fail with, and fdblayer's Layer refuses writes so. A Gate is
// safe for concurrent use.
type Gate struct {
	s        store.Store
	name     string
	binary   string
	readOnly bool
	newStore bool
	refresh  time.Duration
	lease    time.Duration
	clock    clock.Clock
	log      *slog.Logger
	known    map[string]linked
	// knownRow is known as the process row lists it, by namespace.
	knownRow []gen.NamespaceFormat

	// formats is the store's format of each namespace that has a row, as
	// last read (a namespace without one is at 1).
	formats atomic.Pointer[map[string]uint32]
	// fence is the error writes fail with once the store's format of a
	// linked namespace is above what the binary knows; nil until then.
	fence atomic.Pointer[NewerFormatError]

	// ctx ends when Close begins: the background refresh's calls end
	// with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // serializes Sync, Raise's bookkeeping and Close
	row     store.Value
	started uint64
	closed  bool
	stop    chan struct{}
	done    chan struct{}
}

// gatesOpened counts the gates this process opened, for default names.
var gatesOpened atomic.Int64

// newGate checks cfg and builds a gate over s, unopened.
func newGate(s store.Store, cfg GateConfig) (*Gate, error) {
	invalid := func(format string, args ...any) (*Gate, error) {
		return nil, fmt.Errorf("evolve: gate: "+format+": %w", append(args, store.ErrInvalid)...)
	}
	if s == nil {
		return invalid("nil store")
	}
	if cfg.Refresh < 0 {
		return invalid("GateConfig.Refresh %v is negative", cfg.Refresh)
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	if len(cfg.Process) > gen.MaxProcessKeyProcess {
		return invalid("GateConfig.Process has %d bytes, limit %d", len(cfg.Process), gen.MaxProcessKeyProcess)
	}
	if len(cfg.Binary) > gen.MaxProcessV1Binary {
		return invalid("GateConfig.Binary has %d bytes, limit %d", len(cfg.Binary), gen.MaxProcessV1Binary)
	}
	known := map[string]linked{}
	for _, sc := range registry.All() {
		known[sc.Namespace] = linked{format: max(sc.Format, 1), importPath: sc.ImportPath}
	}
	for _, ns := range slices.Sorted(maps.Keys(cfg.Known)) {
		k, ok := known[ns]
		f := cfg.Known[ns]
		switch {
		case !ok:
			return invalid("GateConfig.Known[%q]: no linked package declares the namespace", ns)
		case f < 1 || f > k.format:
			return invalid("GateConfig.Known[%q] is %d: the linked package (%s) knows formats 1-%d", ns, f, k.importPath, k.format)
		}
		k.format = f
		known[ns] = k
	}
	if len(known) > gen.MaxProcessV1Known {
		return invalid("%d linked namespaces: a process row lists at most %d", len(known), gen.MaxProcessV1Known)
	}
	if cfg.Process == "" {
		cfg.Process = defaultProcess()
	}
	if cfg.Binary == "" {
		cfg.Binary = defaultBinary()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	g := &Gate{
		s:        s,
		name:     cfg.Process,
		binary:   cfg.Binary,
		readOnly: cfg.ReadOnly,
		newStore: cfg.NewStore && !cfg.ReadOnly,
		refresh:  cfg.Refresh,
		lease:    leaseRefreshes * cfg.Refresh,
		clock:    cfg.Clock,
		log:      cfg.Logger.With("process", cfg.Process),
		known:    known,
	}
	for _, ns := range slices.Sorted(maps.Keys(known)) {
		g.knownRow = append(g.knownRow, gen.NamespaceFormat{Namespace: ns, Format: known[ns].format})
	}
	none := map[string]uint32{}
	g.formats.Store(&none)
	return g, nil
}

// defaultProcess is host:pid, with #N for the N-th gate of the process.
func defaultProcess() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	name := fmt.Sprintf("%s:%d", host, os.Getpid())
	if n := gatesOpened.Add(1); n > 1 {
		name += fmt.Sprintf("#%d", n)
	}
	return cut(name, gen.MaxProcessKeyProcess)
}

// defaultBinary is the executable's name and its main module's path and
// version.
func defaultBinary() string {
	name := filepath.Base(os.Args[0])
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path != "" {
		name += " (" + bi.Main.Path
		if bi.Main.Version != "" {
			name += "@" + bi.Main.Version
		}
		name += ")"
	}
	return cut(name, gen.MaxProcessV1Binary)
}

// cut cuts s to at most n bytes, at a rune.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// guardReads adds to b the guards of rows b's function read and only
// relies on, as many as b's store lets one batch hold: on a
// store.Transactor the transaction's reads cover those left out (the
// store checks them at commit); on another store a batch that cannot
// hold them all fails with an error wrapping store.ErrInvalid.
func (g *Gate) guardReads(b *store.Batch, read []store.Precondition) error {
	caps := g.s.Capabilities()
	n := min(len(read), max(caps.MaxBatchOps-caps.ReservedBatchOps-b.Ops(), 0))
	b.Require(read[:n]...)
	if _, transactor := g.s.(store.Transactor); n < len(read) && !transactor {
		return fmt.Errorf("evolve: open the gate: %d format rows and the process row need %d operations, more than one batch of %d holds on a store without transactions: %w",
			len(read), b.Ops()+len(read)-n, caps.MaxBatchOps-caps.ReservedBatchOps, store.ErrInvalid)
	}
	return nil
}

// OpenGate opens the gate of this process on s: in one transaction of
// Partition (store.Transact) it reads every namespace's store format, and
// fails with a *NewerFormatError (ErrNewerFormat) when the format of a
// namespace this binary links is above the newest it knows, naming the
// namespace, both formats and the package; it records a new store's
// formats (GateConfig.NewStore) and writes the process row, guarded on
// the format rows it read, so that a raise that lands meanwhile makes it
// read them again. Unless the gate is ReadOnly, a goroutine then refreshes
// it every GateConfig.Refresh until Close.
//
// It fails with an error wrapping store.ErrInvalid for a field of cfg out
// of range, wrapping store.ErrCorrupt for a format row of a linked
// namespace that does not decode, and with the store's errors.
func OpenGate(ctx context.Context, s store.Store, cfg GateConfig) (*Gate, error) {
	g, err := newGate(s, cfg)
	if err != nil {
		return nil, err
	}
	if err := g.open(ctx); err != nil {
		return nil, err
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if !g.readOnly {
		g.stop, g.done = make(chan struct{}), make(chan struct{})
		go g.loop()
	}
	return g, nil
}

// open reads the formats, checks them, and writes the process row.
func (g *Gate) open(ctx context.Context) error {
	if g.readOnly {
		// Reads only: a read-only store begins no write transaction.
		rows, err := readFormatRows(ctx, store.ReaderOf(g.s, Partition))
		if err != nil {
			return err
		}
		if err := g.check(rows, false); err != nil {
			return err
		}
		formats := formatsOf(rows)
		g.formats.Store(&formats)
		return nil
	}
	var (
		formats map[string]uint32
		row     store.Value
		started uint64
		took    string
	)
	_, err := store.Transact(ctx, g.s, Partition, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		row, took = nil, ""
		rows, err := readFormatRows(ctx, r)
		if err != nil {
			return nil, err
		}
		formats = formatsOf(rows)
		if err := g.check(rows, false); err != nil {
			return nil, err
		}
		nowMs, err := store.EncodeTime(g.clock.Now())
		if err != nil {
			return nil, fmt.Errorf("evolve: open the gate: the clock: %w", err)
		}
		b := store.NewBatch()
		// read guards the format rows this batch only relies on: added
		// after the writes and their own guards, as many as the batch
		// holds (see guardReads).
		var read []store.Precondition
		for _, ns := range slices.Sorted(maps.Keys(g.known)) {
			key, err := formatKey(ns)
			if err != nil {
				return nil, err
			}
			fr, ok := rows[ns]
			if ok || !g.newStore || g.known[ns].format == 1 {
				read = append(read, store.Guard(key, fr.value))
				continue
			}
			b.Require(store.Guard(key, fr.value))
			// A new store starts at what this binary knows.
			f := g.known[ns].format
			v, err := gen.EncodeStoreFormatV1(gen.StoreFormatV1{Format: f, AtMs: nowMs, By: g.name,
				Reason: "a new store starts at the formats of the binary that creates it"})
			if err != nil {
				return nil, fmt.Errorf("evolve: open the gate: %w", err)
			}
			hk, err := raisedKey(ns, f)
			if err != nil {
				return nil, err
			}
			b.Require(store.Absent(hk)).Put(key, v).Put(hk, v)
			formats[ns] = f
		}
		pk, err := processKey(g.name)
		if err != nil {
			return nil, err
		}
		old, ok, err := r.Get(ctx, pk)
		if err != nil {
			return nil, fmt.Errorf("evolve: read the process row: %w", err)
		}
		if ok {
			if p, err := processValues.Decode(old); err != nil || p.ExpiresAtMs > nowMs {
				took = "a live row of this process name; taken over (a process that ended without closing its gate, or another named alike: name processes apart with GateConfig.Process)"
			}
		}
		started = nowMs
		if row, err = g.processRow(nowMs, nowMs); err != nil {
			return nil, err
		}
		b.Require(store.Guard(pk, old)).Put(pk, row)
		return b, g.guardReads(b, read)
	}, store.TransactConfig{})
	if err != nil {
		return err
	}
	if took != "" {
		g.log.Warn("evolve: gate: " + took)
	}
	g.formats.Store(&formats)
	g.mu.Lock()
	g.row, g.started = row, started
	g.mu.Unlock()
	return nil
}

// processRow encodes this process's row, started at startedMs and live
// for a lease from nowMs.
func (g *Gate) processRow(startedMs, nowMs uint64) (store.Value, error) {
	v, err := gen.EncodeProcessV1(gen.ProcessV1{Binary: g.binary, StartedAtMs: startedMs,
		ExpiresAtMs: addMs(nowMs, uint64(g.lease/time.Millisecond)), Known: g.knownRow})
	if err != nil {
		return nil, fmt.Errorf("evolve: encode the process row: %w", err)
	}
	return v, nil
}

// check fails when the store's format of a linked namespace, in rows, is
// above what this binary knows (fenced: the gate was open already), or
// its row does not decode.
func (g *Gate) check(rows map[string]formatRow, fenced bool) error {
	for _, ns := range slices.Sorted(maps.Keys(g.known)) {
		fr, ok := rows[ns]
		if !ok {
			continue
		}
		k := g.known[ns]
		switch {
		case errors.Is(fr.err, store.ErrNewerVersion):
			return &NewerFormatError{Namespace: ns, Known: k.format, ImportPath: k.importPath, Fenced: fenced, Row: fr.err}
		case fr.err != nil:
			return fmt.Errorf("evolve: the store format row of namespace %q: %w", ns, fr.err)
		case fr.format > k.format:
			return &NewerFormatError{Namespace: ns, Format: fr.format, Known: k.format, ImportPath: k.importPath, Fenced: fenced}
		}
	}
	return nil
}

// loop refreshes the gate every refresh until Close.
func (g *Gate) loop() {
	defer close(g.done)
	t := time.NewTicker(g.refresh)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(g.ctx, max(g.refresh, 5*time.Second))
		err := g.Sync(ctx)
		cancel()
		if err != nil && g.ctx.Err() == nil && !errors.Is(err, ErrNewerFormat) {
			g.log.Warn("evolve: gate: refresh failed; the process row may expire", "error", err)
		}
	}
}

// Sync reads the store's formats again and renews the process row (and
// deletes up to 16 expired ones of other processes, each guarded by its
// value), in one transaction, as the background refresh does every
// GateConfig.Refresh. When the format of a namespace this binary links
// was raised past what it knows, the gate is fenced from then on: Sync
// logs it (an error, once a refresh) and returns the *NewerFormatError
// (ErrNewerFormat) Fenced returns. It fails with the store's errors (the
// formats stay as last read), and with store.ErrInvalid after Close. A
// ReadOnly gate only reads.
func (g *Gate) Sync(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("evolve: gate of %s is closed: %w", g.name, store.ErrInvalid)
	}
	var (
		rows map[string]formatRow
		row  store.Value
		err  error
	)
	if g.readOnly {
		// Reads only: a read-only store begins no write transaction.
		rows, err = readFormatRows(ctx, store.ReaderOf(g.s, Partition))
	} else {
		rows, row, err = g.renew(ctx)
	}
	if err != nil {
		return fmt.Errorf("evolve: refresh: %w", err)
	}
	if row != nil {
		g.row = row
	}
	formats := formatsOf(rows)
	// A format never goes down: keep what this process raised or read
	// higher (a store that lost a row is not taken to be lower).
	for ns, f := range *g.formats.Load() {
		formats[ns] = max(formats[ns], f)
	}
	g.formats.Store(&formats)
	if err := g.check(rows, true); err != nil {
		var nf *NewerFormatError
		if !errors.As(err, &nf) {
			return err
		}
		g.fence.CompareAndSwap(nil, nf)
		g.log.Error("evolve: gate: the store's format was raised past what this binary knows; its writes are refused until the process is replaced",
			"error", nf)
	}
	if f := g.Fenced(); f != nil {
		return f
	}
	return nil
}

// renew reads the format rows and the process rows, and renews this
// process's row, deleting up to maxExpiredDeletes expired rows of others,
// in one transaction of Partition. It returns the format rows and the row
// written.
func (g *Gate) renew(ctx context.Context) (rows map[string]formatRow, row store.Value, err error) {
	_, err = store.Transact(ctx, g.s, Partition, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		row = nil
		var err error
		if rows, err = readFormatRows(ctx, r); err != nil {
			return nil, err
		}
		nowMs, err := store.EncodeTime(g.clock.Now())
		if err != nil {
			return nil, fmt.Errorf("the clock: %w", err)
		}
		procs, err := readProcessRows(ctx, r)
		if err != nil {
			return nil, err
		}
		b := store.NewBatch()
		expired := 0
		for _, p := range procs {
			if expired == maxExpiredDeletes {
				break
			}
			if p.name == g.name || p.err != nil || p.row.ExpiresAtMs > nowMs {
				continue
			}
			b.Require(store.Equals(p.key, p.value)).Delete(p.key)
			expired++
		}
		pk, err := processKey(g.name)
		if err != nil {
			return nil, err
		}
		if row, err = g.processRow(g.started, nowMs); err != nil {
			return nil, err
		}
		return b.Put(pk, row), nil
	}, store.TransactConfig{})
	return rows, row, err
}

// Format returns the store's format of namespace ns as the gate last read
// it (at open, at the latest refresh, or raised by this gate): 1 for a
// namespace without a format row. It does no I/O.
func (g *Gate) Format(ns string) uint32 {
	if f, ok := (*g.formats.Load())[ns]; ok {
		return f
	}
	return 1
}

// Known returns the newest format of namespace ns this binary knows: the
// linked package's (registry.Schema.Format), or GateConfig.Known's; 0
// for a namespace it does not link.
func (g *Gate) Known(ns string) uint32 { return g.known[ns].format }

// Process returns the name of this process's row.
func (g *Gate) Process() string { return g.name }

// Fenced returns nil while the store's formats are ones this binary knows,
// and, once a refresh saw the format of a linked namespace raised past
// what it knows, the *NewerFormatError (ErrNewerFormat, Fenced set) every
// write of this process must fail with from then on. It does no I/O.
func (g *Gate) Fenced() error {
	if f := g.fence.Load(); f != nil {
		return f
	}
	return nil
}

// Close stops the refresh and deletes the process row, guarded by its
// value as last written (a row taken over by another process of the same
// name stays). It fails with the store's error when the delete fails: the
// row then expires. Later calls return nil.
func (g *Gate) Close() error {
	g.cancel()
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	row := g.row
	g.mu.Unlock()
	if g.stop != nil {
		close(g.stop)
		<-g.done
	}
	if g.readOnly || row == nil {
		return nil
	}
	pk, err := processKey(g.name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(g.refresh, 5*time.Second))
	defer cancel()
	if _, err := g.s.Apply(ctx, Partition, store.NewBatch().Require(store.Equals(pk, row)).Delete(pk)); err != nil {
		return fmt.Errorf("evolve: close the gate of %s: delete its process row: %w", g.name, err)
	}
	return nil
}

// addMs adds d milliseconds to t without wrapping.
func addMs(t, d uint64) uint64 {
	if t > ^uint64(0)-d {
		return ^uint64(0)
	}
	return t + d
}
