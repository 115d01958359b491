package evolve

import (
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// RaiseConfig says who raises a format and why (see Gate.Raise).
type RaiseConfig struct {
	// By names who raises it (an operator, a deploy job): required, at
	// most gen.MaxStoreFormatV1By bytes.
	By string
	// Reason says why (the feature the format brings): required, at most
	// gen.MaxStoreFormatV1Reason bytes.
	Reason string
	// Force raises past live processes that do not know the format, for
	// processes known to be dead whose rows have not expired yet: the
	// history names them. A process that is not dead then reads rows it
	// cannot decode (holding them), and is fenced at its next refresh.
	Force bool
}

// Raise raises the store's format of namespace ns to to, for good, in one
// guarded batch of Partition (store.Transact: its function runs again
// when a guard fails): the format row must still hold to-1 (or be absent,
// format 1, for to 2), every live process that links ns (its row not
// expired on the gate's clock) must know to, each read row guarded (on a
// store.Transactor the transaction's reads cover the class, so a process
// that registers meanwhile makes it read again), and the history row of
// to must be absent; it writes the format row and the history row (who,
// when, why, and the processes Force went past). From then on this gate's
// Format(ns) is to, every other gate's after its next refresh, and a
// process whose binary does not know to refuses to open the store.
//
// It fails with an error wrapping store.ErrInvalid, before any I/O, when
// the gate is closed, ns is not linked, to is above what this binary knows (a binary that
// knows the format raises it), or cfg's By or Reason is empty or too
// long; with a *RaiseError (ErrRaiseRefused) when the store is not at
// to-1 (a raise goes one format at a time, and never down) or a live
// process does not know to (listing them) and cfg.Force is not set; with
// store.ErrInvalid when more live processes than a batch guards share a
// store that is not a store.Transactor; with ErrNewerFormat when the gate
// is fenced; and with the store's errors.
func (g *Gate) Raise(ctx context.Context, ns string, to uint32, cfg RaiseConfig) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("evolve: raise namespace %q to format %d: "+format+": %w", append(append([]any{ns, to}, args...), store.ErrInvalid)...)
	}
	k, ok := g.known[ns]
	switch {
	case !ok:
		return invalid("this binary does not link the namespace: raise it with the service's own binary")
	case to < 2:
		return invalid("every namespace starts at format 1")
	case to > k.format:
		return invalid("this binary knows formats 1-%d (%s): raise it with a binary that knows %d", k.format, k.importPath, to)
	case cfg.By == "" || len(cfg.By) > gen.MaxStoreFormatV1By:
		return invalid("RaiseConfig.By has %d bytes: name who raises it in 1 to %d", len(cfg.By), gen.MaxStoreFormatV1By)
	case cfg.Reason == "" || len(cfg.Reason) > gen.MaxStoreFormatV1Reason:
		return invalid("RaiseConfig.Reason has %d bytes: say why in 1 to %d", len(cfg.Reason), gen.MaxStoreFormatV1Reason)
	}
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return invalid("the gate is closed")
	}
	if err := g.Fenced(); err != nil {
		return err
	}
	fk, err := formatKey(ns)
	if err != nil {
		return err
	}
	hk, err := raisedKey(ns, to)
	if err != nil {
		return err
	}
	_, transactor := g.s.(store.Transactor)
	caps := g.s.Capabilities()
	_, err = store.Transact(ctx, g.s, Partition, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		observed, _, err := r.Get(ctx, fk)
		if err != nil {
			return nil, fmt.Errorf("evolve: raise: read the format of namespace %q: %w", ns, err)
		}
		cur := uint32(1)
		if observed != nil {
			v, err := formatValues.Decode(observed)
			if err != nil {
				return nil, fmt.Errorf("evolve: raise: the format row of namespace %q: %w", ns, err)
			}
			cur = v.Format
		}
		if to != cur+1 {
			return nil, &RaiseError{Namespace: ns, Format: cur, To: to}
		}
		nowMs, err := store.EncodeTime(g.clock.Now())
		if err != nil {
			return nil, fmt.Errorf("evolve: raise: the clock: %w", err)
		}
		procs, err := readProcessRows(ctx, r)
		if err != nil {
			return nil, err
		}
		b := store.NewBatch().Require(store.Guard(fk, observed), store.Absent(hk))
		var unaware []Process
		live := 0
		for _, p := range procs {
			if p.err == nil && p.row.ExpiresAtMs <= nowMs {
				continue // expired: its process ended
			}
			live++
			if len(b.Preconditions)+2 < caps.MaxBatchOps {
				b.Require(store.Equals(p.key, p.value))
			} else if !transactor {
				return nil, fmt.Errorf("evolve: raise: %d live processes: more than one batch of %d operations guards on a store without transactions: %w",
					live, caps.MaxBatchOps, store.ErrInvalid)
			}
			if pr := processOf(p); pr.Err != nil || pr.Known[ns] != 0 && pr.Known[ns] < to {
				unaware = append(unaware, pr)
			}
		}
		if len(unaware) > 0 && !cfg.Force {
			return nil, &RaiseError{Namespace: ns, Format: cur, To: to, Unaware: unaware}
		}
		var forced []string
		for _, p := range unaware {
			if len(forced) < gen.MaxStoreFormatV1Forced {
				forced = append(forced, cut(p.Name, gen.MaxStoreFormatV1ForcedElem))
			}
		}
		v, err := gen.EncodeStoreFormatV1(gen.StoreFormatV1{Format: to, AtMs: nowMs, By: cfg.By, Reason: cfg.Reason, Forced: forced})
		if err != nil {
			return nil, fmt.Errorf("evolve: raise namespace %q: %w", ns, err)
		}
		return b.Put(fk, v).Put(hk, v), nil
	}, store.TransactConfig{})
	var re *RaiseError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("evolve: raise: %w", err)
	case err != nil:
		return fmt.Errorf("evolve: raise namespace %q to format %d: %w", ns, to, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	formats := map[string]uint32{}
	for n, f := range *g.formats.Load() {
		formats[n] = f
	}
	formats[ns] = max(formats[ns], to)
	g.formats.Store(&formats)
	g.log.Info("evolve: raised the store's format", "namespace", ns, "format", to, "by", cfg.By, "reason", cfg.Reason, "forced", cfg.Force)
	return nil
}
