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
		"schemas (by tuple and hex where none knows them), and its revision, which a\n" +
		"repair's -expect takes. A row that does not decode is shown with the reason.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "the partition, as a tuple (\"orders\", 1, 7) or x:HEX")
		fs.StringVar(&o.key, "key", "", "the key, as a tuple (16, 5) or x:HEX")
	},
	run: (*Command).get,
}

var scanCommand = subcommand{
	name:  "scan",
	short: "the rows of a partition, decoded",
	long: "scan prints the rows of -partition in key order, decoded as get decodes them:\n" +
		"all of them, or those of one key class (-class, by name or tag), at most -limit,\n" +
		"after -after.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "the partition, as a tuple (\"orders\", 1, 7) or x:HEX")
		fs.StringVar(&o.class, "class", "", "only the rows of this key class (a name such as RelayKey, or a tag)")
		fs.StringVar(&o.after, "after", "", "start after this key (a tuple or x:HEX)")
		fs.IntVar(&o.limit, "limit", 100, "the most rows printed")
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
	},
	run: (*Command).quarantined,
}

func (c *Command) get(ctx context.Context, st *opened, o *options) error {
	if o.partID == nil || o.keyBytes == nil {
		return usagef("get: -partition and -key are required")
	}
	p := st.partition(o)
	v, ok, err := st.layer.Get(ctx, p, o.keyBytes)
	if err != nil {
		return err
	}
	if !ok {
		return refusedf("no row at %s in %s", formatTuple(o.keyBytes), formatTuple(o.partID))
	}
	sch, _, _ := schemaOf(o.partID)
	row := decodeRow(sch, o.keyBytes, v)
	if o.json {
		return json.NewEncoder(c.cfg.Stdout).Encode(map[string]any{"partition": formatTuple(o.partID), "row": row})
	}
	printRow(c, row)
	return nil
}

func printRow(c *Command, r Row) {
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
	fmt.Fprintf(w, "value   %s\n", r.Value)
	fmt.Fprintf(w, "rev     %s\n", r.Rev)
	if r.Corrupt != "" {
		fmt.Fprintf(w, "corrupt %s\n", r.Corrupt)
	}
}

// classBounds returns the key range of the class -class names (all keys
// when none).
func classBounds(o *options) (store.Key, store.Key, error) {
	if o.class == "" {
		return store.Key{0x00}, store.Key{0xFF}, nil
	}
	sch, _, _ := schemaOf(o.partID)
	var tag uint32
	found := false
	if n, err := fmt.Sscanf(o.class, "%d", &tag); err == nil && n == 1 {
		found = true
	} else {
		for _, k := range append(mkitSchema().Keys, sch.Keys...) {
			if k.Name == o.class {
				tag, found = k.Tag, true
				break
			}
		}
	}
	if !found {
		return nil, nil, usagef("scan: -class %q is no key class of the partition's schema or the library's", o.class)
	}
	start := tuple.AppendUint(nil, uint64(tag))
	return start, tuple.RangeEnd(start), nil
}

func (c *Command) scan(ctx context.Context, st *opened, o *options) error {
	if o.partID == nil {
		return usagef("scan: -partition is required")
	}
	start, end, err := classBounds(o)
	if err != nil {
		return err
	}
	if o.afterBytes != nil {
		start = append(append(store.Key{}, o.afterBytes...), 0x00)
	}
	limit := o.limit
	if limit == 0 {
		limit = 100
	}
	p := st.partition(o)
	sch, _, _ := schemaOf(o.partID)
	var rows []Row
	n, err := scanRange(ctx, st.layer, p, start, end, limit, func(k store.Key, v store.Value) {
		rows = append(rows, decodeRow(sch, k, v))
	})
	if err != nil {
		return err
	}
	if o.json {
		if rows == nil {
			rows = []Row{}
		}
		return json.NewEncoder(c.cfg.Stdout).Encode(map[string]any{"partition": formatTuple(o.partID), "rows": rows, "more": n.More})
	}
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tCLASS\tREV\tVALUE")
	for i, r := range rows {
		class := r.Class
		if class == "" {
			class = "?"
		}
		value := r.Value
		if r.Record != "" {
			value = r.Value
		}
		if r.Corrupt != "" {
			value = "CORRUPT: " + r.Corrupt
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Key, class, r.Rev, value)
		if (i+1)%flushEvery == 0 {
			_ = tw.Flush()
		}
	}
	_ = tw.Flush()
	if n.More {
		fmt.Fprintf(c.cfg.Stdout, "more rows follow: run again with -after %q\n", rows[len(rows)-1].Key)
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
	// Rev is the quarantine record's revision, which restore's -expect
	// takes.
	Rev string `json:"rev"`
	// Corrupt is set when the quarantine record itself does not decode.
	Corrupt string `json:"corrupt,omitempty"`
}

func (c *Command) quarantined(ctx context.Context, st *opened, o *options) error {
	var all []QuarantinedRow
	each := func(id store.Identity) error {
		idb, _ := id.AppendTuple(nil)
		sch, _, _ := schemaOf(idb)
		start, end := classRange(gen.TagQuarantineKey)
		var keys []store.Key
		var vals []store.Value
		_, err := scanRange(ctx, st.layer, id, start, end, max(o.maxRows, 1), func(k store.Key, v store.Value) {
			keys, vals = append(keys, k), append(vals, v)
		})
		if err != nil {
			return err
		}
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
				return err
			}
			v, ok, err := st.layer.Get(ctx, id, vk)
			if err != nil {
				return err
			}
			q.Row = decodeRow(sch, qk.Key, v)
			if !ok {
				q.Row.Corrupt = "the moved row's value is missing beside its record"
			}
			all = append(all, q)
		}
		return nil
	}
	if err := eachPartition(ctx, st, o, each); err != nil {
		return err
	}
	if o.json {
		if all == nil {
			all = []QuarantinedRow{}
		}
		return json.NewEncoder(c.cfg.Stdout).Encode(map[string]any{"quarantined": all})
	}
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tKEY\tCLASS\tAT\tWHO\tREASON\tREV")
	for _, q := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%q\t%s\n", q.Partition, q.Row.Key, q.Row.Class, q.At, q.Who, q.Reason, q.Rev)
	}
	_ = tw.Flush()
	fmt.Fprintf(c.cfg.Stdout, "%d quarantined rows\n", len(all))
	for _, q := range all {
		if q.Corrupt != "" {
			fmt.Fprintf(c.cfg.Stdout, "corrupt quarantine record %s in %s: %s\n", q.Row.Key, q.Partition, q.Corrupt)
		}
	}
	return nil
}
