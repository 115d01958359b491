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
	// Value is the timer's value whole, decoded for the library's kinds;
	// ValueShort shortens it for a screen (see Row.Short).
	Value string `json:"value"`

	short string
}

// Short is the value as the text and HTML views show it.
func (d DeadLetterRow) Short() string { return d.short }

// deadLetterRows lists up to maxRows dead letters of p.
func (v *viewer) deadLetterRows(ctx context.Context, id store.Identity) ([]DeadLetterRow, bool, error) {
	idb, _ := id.AppendTuple(nil)
	var out []DeadLetterRow
	var after store.Cursor
	for len(out) < v.maxRows {
		dls, next, err := timers.DeadLetters(ctx, store.ReaderOf(v.l, id), after, min(v.maxRows-len(out), 256))
		if err != nil {
			return out, false, err
		}
		for _, d := range dls {
			out = append(out, DeadLetterRow{
				Partition: formatTuple(idb), Kind: uint16(d.Kind), Name: v.kindName(d.Kind), Reference: d.Reference,
				Due: d.DueAt.UTC(), Dead: d.At.UTC(), Attempts: d.Attempts, Permanent: d.Permanent, LastError: d.LastError,
				Value: timerValueText(d.Kind, d.Value, false), short: timerValueText(d.Kind, d.Value, true),
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
// library's kinds decoded, a service's as a tuple or x:HEX; short
// shortens it as Row.Short does.
func timerValueText(kind timers.Kind, v store.Value, short bool) string {
	if _, decode := timerValueDecoder(uint16(kind)); decode != nil && len(v) > 0 {
		if rec, err := decode(v); err == nil {
			return formatValue(reflect.ValueOf(rec), short)
		}
	}
	return formatBytes(v, short)
}

// DeadLettersReport is the timers -dead view.
type DeadLettersReport struct {
	Now         time.Time       `json:"now"`
	DeadLetters []DeadLetterRow `json:"dead_letters"`
	More        bool            `json:"more"`
	Next        string          `json:"next,omitempty"`
}

// deadLetters lists the dead letters of partition id (nil: of every
// partition, from after, limit at most).
func (v *viewer) deadLetters(ctx context.Context, id, after []byte, limit int) (DeadLettersReport, error) {
	rep := DeadLettersReport{Now: v.now.UTC(), DeadLetters: []DeadLetterRow{}}
	next, err := v.eachPartition(ctx, id, after, limit, func(id store.Identity) error {
		rows, m, err := v.deadLetterRows(ctx, id)
		rep.DeadLetters = append(rep.DeadLetters, rows...)
		rep.More = rep.More || m
		return err
	})
	if next != nil {
		rep.Next = formatTuple(next)
	}
	return rep, err
}

// deadView is timers -dead.
func (c *Command) deadView(ctx context.Context, st *opened, o *options) error {
	v := c.viewer(st, o)
	rep, err := v.deadLetters(ctx, o.partID, nil, 0)
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(c.cfg.Stdout).Encode(rep)
	}
	now := v.now
	fmt.Fprintf(c.cfg.Stdout, "now %s\n", stamp(now))
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tKIND\tREFERENCE\tDUE\tDEAD\tATTEMPTS\tLAST ERROR\tVALUE")
	for _, d := range rep.DeadLetters {
		attempts := fmt.Sprint(d.Attempts)
		if d.Permanent {
			attempts += ", permanent"
		}
		value := d.Short()
		if o.full {
			value = d.Value
		}
		fmt.Fprintf(tw, "%s\t%s\t%q\t%s\t%s (%s)\t%s\t%q\t%s\n", d.Partition, d.Name, d.Reference, stamp(d.Due),
			stamp(d.Dead), rel(d.Dead, now), attempts, d.LastError, value)
	}
	_ = tw.Flush()
	fmt.Fprintf(c.cfg.Stdout, "%d dead letters\n", len(rep.DeadLetters))
	if rep.More {
		fmt.Fprintf(c.cfg.Stdout, "more dead letters follow in some partitions: raise -max-rows\n")
	}
	return nil
}
