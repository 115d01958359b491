package evolve

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// pageRows is the page size of the evolution rows' scans.
const pageRows = 256

// formatRow is a namespace's store format row as read: its value, and the
// format it holds or why it does not decode.
type formatRow struct {
	value  store.Value
	format uint32
	err    error
}

// readFormatRows reads every namespace's store format row through r. A
// key of the class that does not parse fails it (wrapping
// store.ErrCorrupt): nothing in the partition is skipped.
func readFormatRows(ctx context.Context, r store.Reader) (map[string]formatRow, error) {
	out := map[string]formatRow{}
	err := scanClass(ctx, r, gen.TagStoreFormatKey, func(kv store.KeyValue) error {
		k, err := gen.ParseStoreFormatKey(kv.Key)
		if err != nil {
			return fmt.Errorf("evolve: a store format row's key (%x): %w", []byte(kv.Key), err)
		}
		fr := formatRow{value: kv.Value}
		if v, err := formatValues.Decode(kv.Value); err != nil {
			fr.err = err
		} else {
			fr.format = v.Format
		}
		out[k.Namespace] = fr
		return nil
	})
	return out, err
}

// formatsOf returns the formats rows hold (the rows that decode).
func formatsOf(rows map[string]formatRow) map[string]uint32 {
	out := make(map[string]uint32, len(rows))
	for ns, fr := range rows {
		if fr.err == nil {
			out[ns] = fr.format
		}
	}
	return out
}

// processRow is a process row as read.
type processRow struct {
	key   store.Key
	value store.Value
	name  string
	row   gen.ProcessV1
	err   error // the value does not decode
}

// readProcessRows reads every process row through r, in name order. A key
// of the class that does not parse fails it (wrapping store.ErrCorrupt).
func readProcessRows(ctx context.Context, r store.Reader) ([]processRow, error) {
	var out []processRow
	err := scanClass(ctx, r, gen.TagProcessKey, func(kv store.KeyValue) error {
		k, err := gen.ParseProcessKey(kv.Key)
		if err != nil {
			return fmt.Errorf("evolve: a process row's key (%x): %w", []byte(kv.Key), err)
		}
		p := processRow{key: kv.Key, value: kv.Value, name: k.Process}
		p.row, p.err = processValues.Decode(kv.Value)
		out = append(out, p)
		return nil
	})
	return out, err
}

// scanClass calls fn with every row of key class tag, through r, in
// pages.
func scanClass(ctx context.Context, r store.Reader, tag gen.Tag, fn func(store.KeyValue) error) error {
	start, end := gen.ClassRange(tag)
	var after store.Cursor
	for {
		page, err := r.Scan(ctx, start, end, after, pageRows)
		if err != nil {
			return fmt.Errorf("evolve: read the evolution rows: %w", err)
		}
		for _, kv := range page.Entries {
			if err := fn(kv); err != nil {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		after = page.Next
	}
}
