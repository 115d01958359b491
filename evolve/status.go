package evolve

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Status is what a store says of its formats: each namespace's format and
// history, and the processes that opened it (see ReadStatus).
type Status struct {
	// Namespaces are the namespaces with a format row or a history, in
	// namespace order. A namespace not listed is at format 1.
	Namespaces []Namespace
	// Processes are the process rows, live or expired, in name order.
	Processes []Process
}

// Namespace is one namespace's store format and how it got there.
type Namespace struct {
	Name string
	// Format is the store's format of the namespace (1 without a row).
	Format uint32
	// Err says why the format row does not decode (Format is then 0): a
	// newer binary wrote it (store.ErrNewerVersion), or it is corrupt.
	Err error
	// Steps are the raises (and a new store's start), in format order.
	Steps []Step
}

// Step is one step of a namespace's history: the format it reached, when,
// by whom and why, and the live processes a forced raise went past.
type Step struct {
	Format uint32
	At     time.Time
	By     string
	Reason string
	Forced []string
	// Err says why the history row does not decode (only Format is then
	// known, from its key).
	Err error
}

// Process is a process row: a process that opened the store with a gate
// that writes.
type Process struct {
	Name    string
	Binary  string
	Started time.Time
	// Expires is when the row stops being live unless renewed: a process
	// that ended without closing its gate holds back raises until then.
	Expires time.Time
	// Known is the newest format its binary knows of each namespace it
	// links.
	Known map[string]uint32
	// Err says why the row does not decode (the other fields are then
	// zero but Name).
	Err error
}

// Live reports whether the process row is live at now.
func (p Process) Live(now time.Time) bool { return p.Err != nil || now.Before(p.Expires) }

// processOf converts a process row as read.
func processOf(p processRow) Process {
	if p.err != nil {
		return Process{Name: p.name, Err: p.err}
	}
	known := make(map[string]uint32, len(p.row.Known))
	for _, k := range p.row.Known {
		known[k.Namespace] = k.Format
	}
	return Process{Name: p.name, Binary: p.row.Binary, Started: store.DecodeTime(p.row.StartedAtMs),
		Expires: store.DecodeTime(p.row.ExpiresAtMs), Known: known}
}

// ReadStatus reads s's evolution rows (in Partition): every namespace's
// format row and history, every process row. It reads each class in its
// own snapshot (a view's, not a decision's: Raise reads what it decides
// on in one transaction) and writes nothing, so it works on a read-only
// store. A row whose value does not decode is listed with the reason; a
// key that does not parse fails it (wrapping store.ErrCorrupt), as do the
// store's errors.
func ReadStatus(ctx context.Context, s store.Store) (Status, error) {
	r := store.ReaderOf(s, Partition)
	rows, err := readFormatRows(ctx, r)
	if err != nil {
		return Status{}, err
	}
	byName := map[string]*Namespace{}
	for ns, fr := range rows {
		byName[ns] = &Namespace{Name: ns, Format: fr.format, Err: fr.err}
	}
	err = scanClass(ctx, r, gen.TagFormatRaisedKey, func(kv store.KeyValue) error {
		k, err := gen.ParseFormatRaisedKey(kv.Key)
		if err != nil {
			return fmt.Errorf("evolve: a history row's key (%x): %w", []byte(kv.Key), err)
		}
		n := byName[k.Namespace]
		if n == nil {
			n = &Namespace{Name: k.Namespace, Format: 1}
			byName[k.Namespace] = n
		}
		st := Step{Format: k.Format}
		if v, err := raisedValues.Decode(kv.Value); err != nil {
			st.Err = err
		} else {
			st.At, st.By, st.Reason, st.Forced = store.DecodeTime(v.AtMs), v.By, v.Reason, v.Forced
		}
		n.Steps = append(n.Steps, st)
		return nil
	})
	if err != nil {
		return Status{}, err
	}
	var out Status
	for _, ns := range slices.Sorted(maps.Keys(byName)) {
		out.Namespaces = append(out.Namespaces, *byName[ns])
	}
	procs, err := readProcessRows(ctx, r)
	if err != nil {
		return Status{}, err
	}
	for _, p := range procs {
		out.Processes = append(out.Processes, processOf(p))
	}
	return out, nil
}
