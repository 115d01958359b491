package relay

import (
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// scratch is the memory of one fire that does not outlive it: the window,
// the delivery results, the decoded rows and the batches being built. It
// is recycled through a small free list, so a steady relay allocates
// little but what the stores return and what it hands them to keep; reset
// clears it first, so a kept scratch pins no memory of a store or a hook:
// it keeps its own buffers, whose stale row bytes the slices of its last
// window may still point into, and at most that window's partitions (see
// reset).
//
// Design note: a sync.Pool would drop its scratches at every garbage
// collection, and a relay that reads rows of a kilobyte or more collects
// often; refilling it then allocated the decode arenas, some over 32 KiB,
// again and again. The free list keeps at most scratchKept of them.
type scratch struct {
	window
	dispatched

	flat    []Row          // decoded rows in window order
	grouped []Row          // the same rows laid out per group (group.rows)
	costs   []rowCost      // their costs, laid out likewise (group.costs)
	bounds  []int          // group boundaries in grouped
	targets targetIndex    // the group of each target identity
	puts    []gen.RelayPut // decoded puts of every row (Row.Record.Puts)
	deletes [][]byte       // decoded deletes of every row
	dels    []*queued      // the checkpoint's pending deletions
	// traces holds the trace contexts of the decoded rows that carry one
	// (RelayV2), by window index; it is empty while no row does.
	traces []gen.TraceContext

	// readBuf holds the bytes of the window's rows and probeBuf those of
	// the one-row scans of the queue's head, when the source store is a
	// store.ScanAppender; page holds a page's rows until they are copied
	// to raw. Kept between fires, they hold stale row bytes but no
	// references.
	readBuf  []byte
	probeBuf []byte
	page     []store.KeyValue
	// readsKept: the fire read its window into readBuf, whose capacity
	// was readCap when the fire began.
	readsKept bool
	readCap   int

	ckpt store.Batch // the checkpoint batch being built
	// early is the read ahead of the first checkpoint batch's guards,
	// begun beside the lanes (nil: none), and earlyKeys what it reads.
	early     *earlyCheckpoint
	earlyKeys []store.Key

	// The dispatch's memory: one launch per group given a lane, the lanes
	// (each builds its target batches in a batch of its own), and the
	// default runner's channel.
	launches  []launch
	lanes     []*lane
	freeLanes []*lane
	laneDone  chan int
	goRunner  goRunner
}

// scratchKept bounds the scratches kept between fires: about one per
// fire running at once.
const scratchKept = 8

// maxKeptArena bounds the puts and deletes a kept scratch has room for:
// a default window of rows with 16 writes each.
const maxKeptArena = 4 * DefaultMaxRows * 16

// maxKeptLanes bounds the lanes (and their batches) a kept scratch keeps.
const maxKeptLanes = 2 * DefaultConcurrency

// maxKeptReadBytes bounds the read buffers a kept scratch keeps: the
// bytes of a default window (DefaultMaxBytes).
const maxKeptReadBytes = DefaultMaxBytes

var scratchFree = make(chan *scratch, scratchKept)

// getScratch returns a kept scratch, or a new one.
func getScratch() *scratch {
	select {
	case s := <-scratchFree:
		return s
	default:
		return &scratch{targets: targetIndex{groupOf: make(map[string]int), last: -1}}
	}
}

// putScratch resets s and keeps it, unless scratchKept are kept already.
func putScratch(s *scratch) {
	s.reset()
	select {
	case scratchFree <- s:
	default:
	}
}

// reuse returns s emptied, its capacity cleared of references.
func reuse[T any](s []T) []T {
	s = s[:cap(s)]
	clear(s)
	return s[:0]
}

// empty returns s emptied; with wipe, its capacity cleared of references.
func empty[T any](s []T, wipe bool) []T {
	if wipe {
		return reuse(s)
	}
	return s[:0]
}

// reset empties s for the next fire.
//
// The slices that hold the window's rows (raw, rows, the decoded rows and
// their puts and deletes) point into the bytes read. When those lie in
// the kept readBuf, not regrown during the fire, the slices point into
// nothing but the scratch's own memory (and the window's identities), and
// reset only truncates them: clearing them cost a relay about 4% of its
// time, most of it while the garbage collector marks, when every cleared
// pointer goes through its write barrier. Otherwise reset clears them, so
// that a kept scratch never pins a store's pages.
func (s *scratch) reset() {
	s.readBuf, s.probeBuf = keepBytes(s.readBuf), keepBytes(s.probeBuf)
	wipe := !s.readsKept || s.readBuf == nil || cap(s.readBuf) != s.readCap
	s.readsKept, s.readCap = false, cap(s.readBuf)
	s.window = window{
		raw:    empty(s.raw, wipe),
		rows:   empty(s.rows, wipe),
		groups: reuse(s.groups),
	}
	s.dispatched = dispatched{delivered: reuse(s.delivered)}
	s.flat, s.grouped, s.costs, s.bounds = empty(s.flat, wipe), empty(s.grouped, wipe), reuse(s.costs), reuse(s.bounds)
	s.targets.reset()
	s.puts, s.deletes, s.dels = empty(s.puts, wipe), empty(s.deletes, wipe), empty(s.dels, wipe)
	s.traces = empty(s.traces, wipe)
	// Keep no decode arena a rare window of wide rows grew large.
	if cap(s.puts) > maxKeptArena {
		s.puts = nil
	}
	if cap(s.deletes) > maxKeptArena {
		s.deletes = nil
	}
	s.page = reuse(s.page)
	for _, ln := range s.lanes {
		ln.batch = store.Batch{Preconditions: reuse(ln.batch.Preconditions), Writes: reuse(ln.batch.Writes)}
	}
	if len(s.lanes) > maxKeptLanes {
		clear(s.lanes[maxKeptLanes:])
		s.lanes = s.lanes[:maxKeptLanes]
	}
	s.launches, s.freeLanes = reuse(s.launches), reuse(s.freeLanes)
	s.ckpt = store.Batch{Preconditions: reuse(s.ckpt.Preconditions), Writes: reuse(s.ckpt.Writes)}
	s.early, s.earlyKeys = nil, reuse(s.earlyKeys)
}

// keepBytes returns b emptied, or nil when it is over maxKeptReadBytes:
// a rare window of large rows does not pin its buffer.
func keepBytes(b []byte) []byte {
	if cap(b) > maxKeptReadBytes {
		return nil
	}
	return b[:0]
}
