package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"text/tabwriter"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// DeadLetterRow is one dead letter as the timers -dead view shows it.
type DeadLetterRow struct {
	Partition string    `json:"partition"`
	Kind      uint16    `json:"kind"`
	Name      string    `json:"name"`
	Reference string    `json:"reference"`
	Due       time.Time `json:"due"`
	Dead      time.Time `json:"dead"`
	Attempts  int       `json:"attempts"`
	Permanent bool      `json:"permanent"`
	LastError string    `json:"last_error"`
	Value     string    `json:"value"`
}

// deadLetterRows lists up to maxRows dead letters of p.
func (c *Command) deadLetterRows(ctx context.Context, s store.Store, id store.Identity, maxRows int) ([]DeadLetterRow, bool, error) {
	idb, _ := id.AppendTuple(nil)
	var out []DeadLetterRow
	var after store.Cursor
	for len(out) < maxRows {
		dls, next, err := timers.DeadLetters(ctx, store.ReaderOf(s, id), after, min(maxRows-len(out), 256))
		if err != nil {
			return out, false, err
		}
		for _, d := range dls {
			out = append(out, DeadLetterRow{
				Partition: formatTuple(idb), Kind: uint16(d.Kind), Name: c.kindName(d.Kind), Reference: d.Reference,
				Due: d.DueAt.UTC(), Dead: d.At.UTC(), Attempts: d.Attempts, Permanent: d.Permanent, LastError: d.LastError,
				Value: timerValueText(d.Kind, d.Value),
			})
		}
		if next == nil {
			return out, false, nil
		}
		after = next
	}
	return out, true, nil
}

// timerValueText formats a timer's value as the timers view does: the
// library's kinds decoded, a service's as a tuple or x:HEX.
func timerValueText(kind timers.Kind, v store.Value) string {
	if len(v) == 0 {
		return `""`
	}
	if name, decode := timerValueDecoder(uint16(kind)); decode != nil {
		if rec, err := decode(v); err == nil {
			_ = name
			return formatValue(reflect.ValueOf(rec))
		}
	}
	return formatTuple(v)
}

// deadView is timers -dead.
func (c *Command) deadView(ctx context.Context, st *opened, o *options) error {
	now := c.now()
	var all []DeadLetterRow
	more := false
	each := func(id store.Identity) error {
		rows, m, err := c.deadLetterRows(ctx, st.layer, id, o.maxRows)
		all = append(all, rows...)
		more = more || m
		return err
	}
	if err := eachPartition(ctx, st, o, each); err != nil {
		return err
	}
	if o.json {
		if all == nil {
			all = []DeadLetterRow{}
		}
		return json.NewEncoder(c.cfg.Stdout).Encode(map[string]any{"now": now.UTC(), "dead_letters": all, "more": more})
	}
	fmt.Fprintf(c.cfg.Stdout, "now %s\n", stamp(now))
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tKIND\tREFERENCE\tDUE\tDEAD\tATTEMPTS\tLAST ERROR\tVALUE")
	for _, d := range all {
		attempts := fmt.Sprint(d.Attempts)
		if d.Permanent {
			attempts += ", permanent"
		}
		fmt.Fprintf(tw, "%s\t%s\t%q\t%s\t%s (%s)\t%s\t%q\t%s\n", d.Partition, d.Name, d.Reference, stamp(d.Due),
			stamp(d.Dead), rel(d.Dead, now), attempts, d.LastError, d.Value)
	}
	_ = tw.Flush()
	fmt.Fprintf(c.cfg.Stdout, "%d dead letters\n", len(all))
	if more {
		fmt.Fprintf(c.cfg.Stdout, "more dead letters follow in some partitions: raise -max-rows\n")
	}
	return nil
}
