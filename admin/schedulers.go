package admin

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

var schedulersCommand = subcommand{
	name:  "schedulers",
	short: "the schedulers sharing the store, and the partition leases they hold",
	long: "schedulers lists the schedulers' memberships (each scheduler renews its own while\n" +
		"it runs: live until the time shown), and every partition lease a scheduler holds:\n" +
		"whose, until when, and whether it expired. A lease that expired belongs to a\n" +
		"scheduler that stopped before it released the partition (a crash, a kill): the\n" +
		"partition stays parked, its due timers waiting, until another scheduler takes the\n" +
		"lease over at its next listing of parked partitions. A scheduler restarted with\n" +
		"the same Owner takes its own leases back at once.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.maxRows, "max-rows", DefaultMaxRows, "the most memberships listed")
	},
	run: (*Command).schedulers,
}

// MemberRow is a scheduler's membership: it renews it while it runs, and
// it is live until Expires.
type MemberRow struct {
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"`
	Live    bool      `json:"live"`
	// Key is the membership row's key; Corrupt the decoder's reason when
	// its value does not decode.
	Key     string `json:"key"`
	Corrupt string `json:"corrupt,omitempty"`
}

// text says whose membership m is and until when.
func (m MemberRow) text(now time.Time) string {
	switch {
	case m.Corrupt != "":
		return fmt.Sprintf("membership %s does not decode: %s", m.Key, m.Corrupt)
	case m.Live:
		return fmt.Sprintf("%q: live until %s (%s)", m.Owner, stamp(m.Expires), rel(m.Expires, now))
	}
	return fmt.Sprintf("%q: expired %s (%s), not renewed since: not running; the next scheduler to renew its own deletes it", m.Owner, stamp(m.Expires), rel(m.Expires, now))
}

// memberRows reads the schedulers' memberships, up to maxRows.
func (v *viewer) memberRows(ctx context.Context) ([]MemberRow, Count, error) {
	start, end := classRange(gen.TagSchedulerMemberKey)
	var rows []MemberRow
	n, err := scanRange(ctx, v.l, timers.MembersPartition, start, end, v.maxRows, func(k store.Key, val store.Value) {
		m := MemberRow{Key: formatTuple(k)}
		ls, err := decodeLease(val)
		if err != nil {
			m.Corrupt = err.Error()
		} else {
			m.Owner, m.Expires = ls.Owner, msTime(ls.ExpiresAtMs)
			m.Live = m.Expires.After(v.now)
		}
		rows = append(rows, m)
	})
	return rows, n, err
}

// LeaseRow is a partition lease a scheduler holds.
type LeaseRow struct {
	Partition string `json:"partition"`
	LeaseReport
	// Parked says the partition's wake time is parked by the claim (a
	// timer written during the claim lowers it to the lease's expiry at
	// most).
	Parked bool `json:"parked"`
}

// SchedulersReport is the schedulers view.
type SchedulersReport struct {
	Now         time.Time   `json:"now"`
	Members     []MemberRow `json:"members"`
	MembersMore bool        `json:"members_more,omitempty"`
	Leases      []LeaseRow  `json:"leases"`
	// Pauses are the timer kinds paused for the whole store: no
	// scheduler fires them until they are resumed.
	Pauses []PauseReport `json:"pauses"`
	// Next, when set, is the partition a further page of leases starts
	// after.
	Next string `json:"next,omitempty"`
}

// schedulers reads the memberships and the leases of every partition
// after after, limit at most (0: all).
func (v *viewer) schedulers(ctx context.Context, after []byte, limit int) (SchedulersReport, error) {
	rep := SchedulersReport{Now: v.now.UTC(), Members: []MemberRow{}, Leases: []LeaseRow{}}
	members, n, err := v.memberRows(ctx)
	if err != nil {
		return rep, err
	}
	rep.Members = append(rep.Members, members...)
	rep.MembersMore = n.More
	if rep.Pauses, err = v.kindPauses(ctx); err != nil {
		return rep, err
	}
	next, err := walk(ctx, v.l, after, limit, func(id store.Identity) error {
		ps, err := v.stateOf(ctx, id)
		if err != nil || ps.lease == nil {
			return err
		}
		idb, _ := id.AppendTuple(nil)
		rep.Leases = append(rep.Leases, LeaseRow{Partition: formatTuple(idb), LeaseReport: *ps.lease, Parked: ps.wake.parked})
		return nil
	}, func(Unlinked) error { return nil })
	if next != nil {
		rep.Next = formatTuple(next)
	}
	return rep, err
}

func (c *Command) schedulers(ctx context.Context, st *opened, o *options) error {
	v := c.viewer(st, o)
	rep, err := v.schedulers(ctx, nil, 0)
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(c.cfg.Stdout).Encode(rep)
	}
	w := c.cfg.Stdout
	now := v.now
	fmt.Fprintf(w, "now %s\n", stamp(now))
	for _, p := range rep.Pauses {
		fmt.Fprintf(w, "paused: %s\n", p.Text(now))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULER\tMEMBERSHIP")
	for _, m := range rep.Members {
		state := "live until " + stamp(m.Expires) + " (" + rel(m.Expires, now) + ")"
		switch {
		case m.Corrupt != "":
			state = "CORRUPT: " + m.Corrupt
		case !m.Live:
			state = "expired " + rel(m.Expires, now) + " (" + stamp(m.Expires) + "), not renewed since: not running"
		}
		fmt.Fprintf(tw, "%q\t%s\n", m.Owner, state)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d schedulers\n", len(rep.Members))
	if rep.MembersMore {
		fmt.Fprintf(w, "more memberships follow: raise -max-rows\n")
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEASE")
	for _, ls := range rep.Leases {
		fmt.Fprintf(tw, "%s\t%s\n", ls.Partition, ls.text(now))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d partition leases\n", len(rep.Leases))
	return nil
}
