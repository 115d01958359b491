package admin

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/store"
)

var getCommand = subcommand{
	name:  "get",
	short: "one row of a partition, decoded",
	long: "get prints the row at -key of -partition, its key and value decoded by the linked\n" +
		"schemas (by tuple and hex where none knows them), and its rev: a hash of its\n" +
		"value (not a version number), which a repair's -expect takes. A row that does\n" +
		"not decode is shown with the reason. A long value is shortened, with its length:\n" +
		"-full prints it whole, as -json always does.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "the partition, as a tuple (\"orders\", 1, 7) or x:HEX")
		fs.StringVar(&o.key, "key", "", "the key, as a tuple (16, 5) or x:HEX")
		fs.BoolVar(&o.full, "full", false, "print the value whole (text shortens a long one; -json never does)")
	},
	run: (*Command).get,
}

var scanCommand = subcommand{
	name:  "scan",
	short: "the rows of a partition, decoded",
	long: "scan prints the rows of -partition in key order, decoded as get decodes them:\n" +
		"all of them, or those of one key class (-class, by name or tag), at most -limit,\n" +
		"after -after. Each row shows its key as -key and -after take it, the key decoded,\n" +
		"its rev (a hash of its value) and its value, shortened when long (-full prints\n" +
		"values whole, as -json always does).",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "the partition, as a tuple (\"orders\", 1, 7) or x:HEX")
		fs.StringVar(&o.class, "class", "", "only the rows of this key class (a name such as RelayKey, or a tag)")
		fs.StringVar(&o.after, "after", "", "start after this key (a tuple or x:HEX)")
		fs.IntVar(&o.limit, "limit", 100, "the most rows printed")
		fs.BoolVar(&o.full, "full", false, "print values whole (text shortens long ones; -json never does)")
	},
	run: (*Command).scan,
}

var quarantinedCommand = subcommand{
	name:  "quarantined",
	short: "the rows moved aside by quarantine, with who, when and why",
	long: "quarantined lists the rows quarantine moved aside, in -partition or in every\n" +
		"partition: the row's key and value decoded, who moved it, when and why. restore\n" +
		"puts one back.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "only this partition (a tuple or x:HEX)")
		fs.IntVar(&o.maxRows, "max-rows", DefaultMaxRows, "the most rows listed of each partition")
		fs.BoolVar(&o.full, "full", false, "print values whole (text shortens long ones; -json never does)")
	},
	run: (*Command).quarantined,
}

// RowReport is the get view: one row of a partition.
type RowReport struct {
	Partition string `json:"partition"`
	Row       Row    `json:"row"`
}

// get reads the row at key of partition id; ok is false when there is
// none.
func (v *viewer) get(ctx context.Context, id, key []byte) (RowReport, bool, error) {
	p, err := store.ParseIdentity(id)
	if err != nil {
		return RowReport{}, false, usagef("%s is no partition identity: %v", formatTuple(id), err)
	}
	val, ok, err := v.l.Get(ctx, p, key)
	if err != nil || !ok {
		return RowReport{}, false, err
	}
	sch, _, _ := schemaOf(id)
	row := decodeRow(sch, key, val)
	noteFormat(&row, v.l)
	return RowReport{Partition: formatTuple(id), Row: row}, true, nil
}

func (c *Command) get(ctx context.Context, st *opened, o *options) error {
	if o.partID == nil || o.keyBytes == nil {
		return usagef("get: -partition and -key are required")
	}
	rep, ok, err := c.viewer(st, o).get(ctx, o.partID, o.keyBytes)
	if err != nil {
		return err
	}
	if !ok {
		return refusedf("no row at %s in %s", formatTuple(o.keyBytes), formatTuple(o.partID))
	}
	if o.json {
		return json.NewEncoder(c.cfg.Stdout).Encode(rep)
	}
	printRow(c, rep.Row, o.full)
	return nil
}

func printRow(c *Command, r Row, full bool) {
	w := c.cfg.Stdout
	fmt.Fprintf(w, "key     %s\n", r.Key)
	if r.Class != "" {
		fmt.Fprintf(w, "class   %s\n", r.Class)
	}
	if r.Parsed != "" {
		fmt.Fprintf(w, "parsed  %s\n", r.Parsed)
	}
	if r.Record != "" {
		fmt.Fprintf(w, "record  %s\n", r.Record)
	}
	switch {
	case full || !r.Shortened():
		fmt.Fprintf(w, "value   %s\n", r.Value)
	default:
		fmt.Fprintf(w, "value   %s\n        (%d bytes, shortened: -full or -json prints it whole)\n", r.Short(), r.Bytes)
	}
	fmt.Fprintf(w, "rev     %s (a hash of the value, which -expect takes)\n", r.Rev)
	if r.Corrupt != "" {
		fmt.Fprintf(w, "corrupt %s\n", r.Corrupt)
	}
	if r.Newer != "" {
		fmt.Fprintf(w, "newer   %s: written by a newer binary, held until one that reads it runs\n", r.Newer)
	}
}

// classBounds returns the key range of the class class names in a
// partition of identity id (all keys when none).
func classBounds(id []byte, class string) (store.Key, store.Key, error) {
	if class == "" {
		return store.Key{0x00}, store.Key{0xFF}, nil
	}
	sch, _, _ := schemaOf(id)
	var tag uint32
	found := false
	if n, err := fmt.Sscanf(class, "%d", &tag); err == nil && n == 1 {
		found = true
	} else {
		for _, k := range append(mkitSchema().Keys, sch.Keys...) {
			if k.Name == class {
				tag, found = k.Tag, true
				break
			}
		}
	}
	if !found {
		return nil, nil, usagef("scan: -class %q is no key class of the partition's schema or the library's", class)
	}
	start := tuple.AppendUint(nil, uint64(tag))
	return start, tuple.RangeEnd(start), nil
}

// ScanReport is the scan view: rows of a partition in key order, and
// whether more follow.
type ScanReport struct {
	Partition string `json:"partition"`
	Rows      []Row  `json:"rows"`
	More      bool   `json:"more"`
}

// scan reads up to limit rows of partition id of class (every class when
// ""), after the key after (nil: from the first).
func (v *viewer) scan(ctx context.Context, id []byte, class string, after []byte, limit int) (ScanReport, error) {
	p, err := store.ParseIdentity(id)
	if err != nil {
		return ScanReport{}, usagef("%s is no partition identity: %v", formatTuple(id), err)
	}
	start, end, err := classBounds(id, class)
	if err != nil {
		return ScanReport{}, err
	}
	if after != nil {
		start = append(append(store.Key{}, after...), 0x00)
	}
	sch, _, _ := schemaOf(id)
	rep := ScanReport{Partition: formatTuple(id), Rows: []Row{}}
	n, err := scanRange(ctx, v.l, p, start, end, limit, func(k store.Key, val store.Value) {
		row := decodeRow(sch, k, val)
		noteFormat(&row, v.l)
		rep.Rows = append(rep.Rows, row)
	})
	rep.More = n.More
	return rep, err
}

func (c *Command) scan(ctx context.Context, st *opened, o *options) error {
	if o.partID == nil {
		return usagef("scan: -partition is required")
	}
	limit := o.limit
	if limit == 0 {
		limit = 100
	}
	rep, err := c.viewer(st, o).scan(ctx, o.partID, o.class, o.afterBytes, limit)
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(c.cfg.Stdout).Encode(rep)
	}
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tDECODED KEY\tREV\tVALUE")
	for i, r := range rep.Rows {
		decoded := r.Parsed
		if decoded == "" {
			decoded = "?"
		}
		value := r.Short()
		if o.full {
			value = r.Value
		}
		if r.Corrupt != "" {
			value = "CORRUPT: " + r.Corrupt
		}
		if r.Newer != "" {
			value = "NEWER: " + r.Newer
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Key, decoded, r.Rev, value)
		if (i+1)%flushEvery == 0 {
			_ = tw.Flush()
		}
	}
	_ = tw.Flush()
	if rep.More {
		fmt.Fprintf(c.cfg.Stdout, "more rows follow: run again with -after %q\n", rep.Rows[len(rep.Rows)-1].Key)
	}
	return nil
}

// QuarantinedRow is a row quarantine moved aside, as quarantined lists it.
type QuarantinedRow struct {
	Partition string `json:"partition"`
	// Row is the moved row, decoded as its own key's class says.
	Row Row `json:"row"`
	// At, Who and Reason are the quarantine's record; Companion the key of
	// the row moved with it (a timer's reference entry), if any.
	At        string `json:"at"`
	Who       string `json:"who"`
	Reason    string `json:"reason"`
	Companion string `json:"companion,omitempty"`
	// Rev is the quarantine record's rev (a hash of its content, not a
	// version number), which restore's -expect takes.
	Rev string `json:"rev"`
	// Corrupt is set when the quarantine record itself does not decode.
	Corrupt string `json:"corrupt,omitempty"`
}

// QuarantinedReport is the quarantined view.
type QuarantinedReport struct {
	Quarantined []QuarantinedRow `json:"quarantined"`
	Next        string           `json:"next,omitempty"`
}

// quarantinedRows lists the quarantined rows of partition id (nil: of
// every partition, from after, limit at most).
func (v *viewer) quarantinedRows(ctx context.Context, id, after []byte, limit int) (QuarantinedReport, error) {
	rep := QuarantinedReport{Quarantined: []QuarantinedRow{}}
	next, err := v.eachPartition(ctx, id, after, limit, func(id store.Identity) error {
		rows, err := v.partitionQuarantined(ctx, id)
		rep.Quarantined = append(rep.Quarantined, rows...)
		return err
	})
	if next != nil {
		rep.Next = formatTuple(next)
	}
	return rep, err
}

// partitionQuarantined lists up to maxRows quarantined rows of id.
func (v *viewer) partitionQuarantined(ctx context.Context, id store.Identity) ([]QuarantinedRow, error) {
	idb, _ := id.AppendTuple(nil)
	sch, _, _ := schemaOf(idb)
	start, end := classRange(gen.TagQuarantineKey)
	var keys []store.Key
	var vals []store.Value
	_, err := scanRange(ctx, v.l, id, start, end, max(v.maxRows, 1), func(k store.Key, val store.Value) {
		keys, vals = append(keys, k), append(vals, val)
	})
	if err != nil {
		return nil, err
	}
	var all []QuarantinedRow
	for i, k := range keys {
		q := QuarantinedRow{Partition: formatTuple(idb), Rev: rev(vals[i])}
		qk, err := gen.ParseQuarantineKey(k)
		if err != nil {
			q.Corrupt = err.Error()
			q.Row = decodeRow(sch, k, vals[i])
			all = append(all, q)
			continue
		}
		rec, err := gen.DecodeQuarantineV1(vals[i])
		if err != nil {
			q.Corrupt = err.Error()
		} else {
			q.At, q.Who, q.Reason = stamp(msTime(rec.AtMs)), rec.Who, rec.Reason
			if rec.Companion != nil {
				q.Companion = formatTuple(rec.Companion)
			}
		}
		_, vk, err := quarantine.Keys(qk.Key)
		if err != nil {
			return nil, err
		}
		val, ok, err := v.l.Get(ctx, id, vk)
		if err != nil {
			return nil, err
		}
		q.Row = decodeRow(sch, qk.Key, val)
		if !ok {
			q.Row.Corrupt = "the moved row's value is missing beside its record"
		}
		all = append(all, q)
	}
	return all, nil
}

func (c *Command) quarantined(ctx context.Context, st *opened, o *options) error {
	rep, err := c.viewer(st, o).quarantinedRows(ctx, o.partID, nil, 0)
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(c.cfg.Stdout).Encode(rep)
	}
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tKEY\tCLASS\tAT\tWHO\tREASON\tREV\tVALUE")
	for _, q := range rep.Quarantined {
		value := q.Row.Short()
		if o.full {
			value = q.Row.Value
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%q\t%s\t%s\n", q.Partition, q.Row.Key, q.Row.Class, q.At, q.Who, q.Reason, q.Rev, value)
	}
	_ = tw.Flush()
	fmt.Fprintf(c.cfg.Stdout, "%d quarantined rows\n", len(rep.Quarantined))
	for _, q := range rep.Quarantined {
		if q.Corrupt != "" {
			fmt.Fprintf(c.cfg.Stdout, "corrupt quarantine record %s in %s: %s\n", q.Row.Key, q.Partition, q.Corrupt)
		}
	}
	return nil
}
