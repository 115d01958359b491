package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
)

// progress is the database's state, read from it: what every run has
// queued and what is still in the queues.
type progress struct {
	goal    uint64        // rows the plan queues over all runs
	queued  uint64        // rows queued (the sources' outbox sequences)
	backlog uint64        // rows from each source's oldest queued row on
	lag     time.Duration // age of the oldest queued row; zero when none
}

func (p progress) relayed() uint64 { return p.queued - p.backlog }

// status reads the progress: per source its outbox sequence and its oldest
// queued relay row. It reads O(sources) rows.
func status(ctx context.Context, s store.Store, p plan) (progress, error) {
	pr := progress{goal: p.goal * uint64(p.sources)}
	start, end := gen.ClassRange(gen.TagRelayKey)
	nowMs, _ := store.EncodeTime(time.Now())
	for src := range p.sources {
		part := source(src)
		v, _, err := s.Get(ctx, part, outbox.SequenceKey())
		if err != nil {
			return pr, err
		}
		seq, err := outbox.DecodeSequence(v)
		if err != nil {
			return pr, fmt.Errorf("source %d: %w", src, err)
		}
		pr.queued += seq
		page, err := s.Scan(ctx, part, start, end, nil, 1)
		if err != nil {
			return pr, err
		}
		if len(page.Entries) == 0 {
			continue
		}
		k, err := gen.ParseRelayKey(page.Entries[0].Key)
		if err != nil {
			return pr, fmt.Errorf("source %d: %w", src, err)
		}
		row, err := outbox.DecodeRelay(page.Entries[0].Value)
		if err != nil {
			return pr, fmt.Errorf("source %d row %d: %w", src, k.Seq, err)
		}
		if k.Seq == 0 || k.Seq > seq {
			return pr, fmt.Errorf("source %d: queued row %d beyond its outbox sequence %d: %w", src, k.Seq, seq, store.ErrCorrupt)
		}
		pr.backlog += seq - k.Seq + 1
		if nowMs > row.AtMs {
			pr.lag = max(pr.lag, time.Duration(nowMs-row.AtMs)*time.Millisecond)
		}
	}
	return pr, nil
}

// output writes what the run shows: where the database is and what was in
// it, live progress, and the summary.
type output struct {
	w     io.Writer
	bar   bool // a terminal: one line redrawn in place
	every time.Duration
	mu    sync.Mutex
	drawn bool // a bar line is on screen, not yet ended
}

// newOutput shows progress as a bar when w is a terminal and as periodic
// lines otherwise, every `every` (zero: 200ms for the bar, 5s for lines).
func newOutput(w io.Writer, every time.Duration) *output {
	o := &output{w: w, bar: isTerminal(w), every: every}
	if o.every == 0 {
		o.every = 5 * time.Second
		if o.bar {
			o.every = 200 * time.Millisecond
		}
	}
	return o
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (o *output) printf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.drawn {
		fmt.Fprintln(o.w)
		o.drawn = false
	}
	fmt.Fprintf(o.w, format, args...)
}

func (o *output) opened(d *database, p plan, now progress) {
	switch {
	case d.created:
		o.printf("database: %s (new)\n", d.path)
	case d.plan.done:
		o.printf("database: %s (resumed after %s: %s rows relayed and checked; this run adds %s per source)\n",
			d.path, plural(d.plan.runs, "run"), count(now.queued), count(p.goal-d.plan.goal))
	default:
		o.printf("database: %s (resumed: the last run was interrupted with %s of %s rows queued, %s still to relay)\n",
			d.path, count(now.queued), count(now.goal), count(now.backlog))
	}
	o.printf("plan: %d sources x %s rows to %d targets, run %d\n", p.sources, count(p.goal), p.targets, p.runs)
}

// progress shows read's progress every o.every until the returned stop is
// called (which waits for the last line). A read error is shown and the
// next tick tries again.
func (o *output) progress(ctx context.Context, read func(context.Context) (progress, error)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(o.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pr, err := read(ctx)
			if ctx.Err() != nil {
				return
			}
			o.show(pr, err)
		}
	}()
	return func() { cancel(); <-done }
}

func (o *output) show(pr progress, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	line := "progress: " + pr.String()
	if err != nil {
		line = "progress: " + err.Error()
	}
	if !o.bar {
		fmt.Fprintln(o.w, line)
		return
	}
	const width = 30
	filled := 0
	if pr.goal > 0 {
		filled = int(pr.relayed() * width / pr.goal)
	}
	fmt.Fprintf(o.w, "\r\033[K[%s%s] %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), pr)
	o.drawn = true
}

func (p progress) String() string {
	return fmt.Sprintf("queued %s/%s, relayed %s, backlog %s, lag %v",
		count(p.queued), count(p.goal), count(p.relayed()), count(p.backlog), p.lag.Round(time.Millisecond))
}

func (o *output) interrupted(d *database, before, now progress, took time.Duration) {
	o.printf("interrupted after %v: this run queued %s and relayed %s rows; %s of %s queued, %s relayed, backlog %s\n",
		took.Round(time.Millisecond), count(now.queued-before.queued), count(now.relayed()-before.relayed()),
		count(now.queued), count(now.goal), count(now.relayed()), count(now.backlog))
	o.printf("database: %s, closed cleanly; run again with -db %s to resume\n", d.path, d.path)
}

func (o *output) finished(d *database, p plan, before, now progress, n checked, ticks, fires int, took time.Duration) {
	rows := now.queued - before.queued
	o.printf("this run queued %s rows and relayed %s in %v over %d ticks, %d timer fires (%.0f rows/s)\n",
		count(rows), count(now.relayed()-before.relayed()), took.Round(time.Millisecond), ticks, fires, float64(now.relayed()-before.relayed())/took.Seconds())
	o.printf("end check over %s: %s rows (%s target puts) and %d high-water marks: every row delivered exactly once\n",
		plural(p.runs, "run"), count(uint64(n.rows)), count(uint64(n.puts)), n.marks)
	o.printf("database: %s; run again to add -rows more per source, -fresh to start over, or delete the file\n", d.path)
}

// count formats n with thousands separators.
func count(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// plural is "1 run", "2 runs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
