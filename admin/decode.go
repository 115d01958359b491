package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Row is one stored row as the views show it: its key and value decoded
// by the linked schemas where one knows them, by tuple and hex where none
// does. A row that does not decode is shown with the decoder's reason,
// never hidden.
type Row struct {
	// Key is the key as a tuple, or x:HEX when it is none: what -key takes.
	Key string `json:"key"`
	// Class is the key class's name ("" when no linked schema declares its
	// tag), and Parsed the key decoded by it.
	Class  string `json:"class,omitempty"`
	Parsed string `json:"parsed,omitempty"`
	// Record is the name of the record the value decoded as, and Value the
	// decoded value, whole; for a value no schema describes, Value is its
	// bytes as a tuple or x:HEX. Bytes is the value's length.
	Record string `json:"record,omitempty"`
	Value  string `json:"value"`
	Bytes  int    `json:"bytes"`
	// Rev is a hash of the value, not a version number: the first 8
	// bytes of its SHA-256, in hex, so a row written back to an earlier
	// value has its earlier rev again. A repair's -expect takes it, so
	// that a row whose value changed since it was shown is refused.
	Rev string `json:"rev"`
	// Corrupt is the decoder's reason when the key or the value does not
	// decode as its class says.
	Corrupt string `json:"corrupt,omitempty"`
	// Newer says, when the value is of a newer version than this binary
	// reads (store.ErrNewerVersion: a newer binary wrote it), its version
	// and what this binary reads, with the store's format of the
	// namespace where the view knows it: "OrderKey value version 3 (this
	// binary: 1-2; store format orders=2)". Such a row is not corrupt:
	// handlers hold it until a binary that reads it runs.
	Newer string `json:"newer,omitempty"`

	short string // Value shortened for a screen ("": as Value)
	// newerNS is the namespace of a newer value's family, newerText its
	// Newer without the store's format (see noteFormat).
	newerNS, newerText string
}

// Short is the value as the text and HTML views show it: byte strings
// longer than 64 bytes are cut to their first 16, in hex, with their
// length ("x:0000... (256 bytes)"), and long strings likewise; Value
// holds it whole.
func (r Row) Short() string {
	if r.short == "" {
		return r.Value
	}
	return r.short
}

// Shortened reports whether Short cut something of Value.
func (r Row) Shortened() bool { return r.short != "" && r.short != r.Value }

// rev is a value's revision: a hash of its content (see Row.Rev).
func rev(v []byte) string {
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:8])
}

// classOf returns the key class of key in a partition of schema s: the
// library's for tags below 100, s's above. ok is false when the key has no
// integer tag first or no linked schema declares it.
func classOf(s registry.Schema, key []byte) (registry.KeyClass, registry.Schema, bool) {
	r := tuple.NewReader(key)
	tag, err := r.ReadUint()
	if err != nil || tag > 0xffffffff {
		return registry.KeyClass{}, registry.Schema{}, false
	}
	if tag < 100 {
		s, _ = registry.Lookup(gen.SchemaNamespace)
	}
	k, ok := s.Key(uint32(tag))
	return k, s, ok
}

// mkitSchema is the library's own schema, always linked.
func mkitSchema() registry.Schema {
	s, _ := registry.Lookup(gen.SchemaNamespace)
	return s
}

// decodeRow decodes a row of a partition of schema s (the zero Schema when
// the partition's namespace is not linked).
func decodeRow(s registry.Schema, key, value []byte) Row {
	row := decodeRowFull(s, key, value)
	row.Bytes = len(value)
	return row
}

func decodeRowFull(s registry.Schema, key, value []byte) Row {
	row := Row{Key: formatTuple(key), Value: formatBytes(value, false), short: formatBytes(value, true), Rev: rev(value)}
	kc, ks, ok := classOf(s, key)
	if !ok {
		return row
	}
	row.Class = kc.Name
	k, err := kc.Parse(key)
	if err != nil {
		row.Corrupt = err.Error()
	} else {
		row.Parsed = formatValue(reflect.ValueOf(k), false)
	}
	lib := ks.Namespace == gen.SchemaNamespace && err == nil
	var recordName string
	var decode func([]byte) (any, error)
	switch {
	case lib && kc.Tag == uint32(gen.TagQuarantineValueKey):
		// The moved row's own value, decoded as its own key's class says.
		inner := decodeRowFull(s, k.(gen.QuarantineValueKey).Key, value)
		row.Record, row.Value, row.short = inner.Record, inner.Value, inner.short
		if row.Corrupt == "" {
			row.Corrupt = inner.Corrupt
		}
		row.Newer, row.newerNS, row.newerText = inner.Newer, inner.newerNS, inner.newerText
		return row
	case lib && kc.Tag == uint32(gen.TagTimerKey):
		recordName, decode = timerValueDecoder(k.(gen.TimerKey).Kind)
	case lib && kc.Tag == uint32(gen.TagDeadLetterValueKey):
		// A dead timer's value, decoded as its kind's timers are.
		recordName, decode = timerValueDecoder(k.(gen.DeadLetterValueKey).Kind)
	case lib && kc.Tag == uint32(gen.TagSchedulerMemberKey):
		// A scheduler's membership: its owner and until when it is live.
		recordName, decode = "SchedulerLeaseV1", registry.Decoder(gen.DecodeSchedulerLeaseV1)
	case len(kc.Values) > 0:
		// The record of the class's value family that the value's version
		// names: a row is shown as it is stored, never upgraded.
		rec, verr := ks.ValueRecord(kc, value)
		var ve *wire.VersionError
		if errors.As(verr, &ve) {
			row.newerNS = ks.Namespace
			row.newerText = fmt.Sprintf("%s value version %d (this binary: %s", kc.Name, ve.Version, familyVersions(ks, kc))
			row.Newer = row.newerText + ")"
			return row
		}
		if verr != nil {
			if row.Corrupt == "" {
				row.Corrupt = verr.Error()
			}
			return row
		}
		recordName, decode = rec.Name, rec.Decode
	}
	if decode == nil {
		return row
	}
	if recordName == "" || len(value) == 0 && recordName == "RelayTimerV1" {
		return row
	}
	v, derr := decode(value)
	if derr != nil {
		if row.Corrupt == "" {
			row.Corrupt = derr.Error()
		}
		return row
	}
	row.Record, row.Value, row.short = recordName, formatValue(reflect.ValueOf(v), false), formatValue(reflect.ValueOf(v), true)
	return row
}

// familyVersions lists the versions of key class k's value family that
// this binary reads ("1-2", or "1, 3" with a gap).
func familyVersions(s registry.Schema, k registry.KeyClass) string {
	var vs []int
	for _, name := range k.Values {
		if r, ok := s.Record(name); ok {
			vs = append(vs, r.Version)
		}
	}
	slices.Sort(vs)
	if n := len(vs); n > 1 && vs[n-1]-vs[0] == n-1 {
		return fmt.Sprintf("%d-%d", vs[0], vs[n-1])
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ", ")
}

// noteFormat completes a newer row's Newer with the store's format of its
// namespace (f's).
func noteFormat(r *Row, f store.Formats) {
	if r.newerText != "" {
		r.Newer = fmt.Sprintf("%s; store format %s=%d)", r.newerText, r.newerNS, f.Format(r.newerNS))
	}
}

// decodeLease decodes a scheduler lease or membership row.
func decodeLease(v []byte) (gen.SchedulerLeaseV1, error) { return gen.DecodeSchedulerLeaseV1(v) }

// shortBytes is the longest byte string, and shortString the longest
// string, that Short shows whole; longer ones show their first shownBytes
// bytes and their length.
const (
	shortBytes  = 64
	shortString = 160
	shownBytes  = 16
	// shortItems is the most items of a list Short shows whole; longer
	// lists show their first shownItems and their length.
	shortItems = 8
	shownItems = 4
)

// formatBytes prints raw bytes as a tuple when they are one, x:HEX
// otherwise, "" when empty; short cuts those over shortBytes.
func formatBytes(b []byte, short bool) string {
	switch {
	case len(b) == 0:
		return `""`
	case short && len(b) > shortBytes:
		return fmt.Sprintf("x:%s... (%d bytes)", hex.EncodeToString(b[:shownBytes]), len(b))
	}
	return formatTuple(b)
}

// timerValueDecoder returns the record a library timer's value holds,
// by kind: the relay timer's hold, the outcome-delivery timer's state. A
// service's timer values are its handlers' own.
func timerValueDecoder(kind uint16) (string, func([]byte) (any, error)) {
	switch timers.Kind(kind) {
	case timers.KindRelay:
		return "RelayTimerV1", registry.Decoder(gen.DecodeRelayTimerV1)
	case timers.KindOutcomeDelivery:
		return "OutcomeTimer", registry.Decoder(gen.DecodeOutcomeTimer)
	}
	return "", nil
}

// formatValue prints a decoded key or record: structs as Name{Field: v},
// byte strings as tuples (partition identities, keys) or x:HEX, strings
// quoted, names by their String method.
func formatValue(v reflect.Value, short bool) string {
	var sb strings.Builder
	writeValue(&sb, v, 0, short)
	return sb.String()
}

var stringerType = reflect.TypeFor[fmt.Stringer]()

func writeValue(sb *strings.Builder, v reflect.Value, depth int, short bool) {
	if depth > 32 {
		sb.WriteString("...")
		return
	}
	if !v.IsValid() {
		sb.WriteString("nil")
		return
	}
	if v.Kind() == reflect.Struct && v.Type().Implements(stringerType) && v.Type().NumField() == 1 && !v.Type().Field(0).IsExported() {
		// A generated identity: an opaque name.
		sb.WriteString(strconv.Quote(v.Interface().(fmt.Stringer).String()))
		return
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			sb.WriteString("nil")
			return
		}
		writeValue(sb, v.Elem(), depth+1, short)
	case reflect.Struct:
		t := v.Type()
		sb.WriteString(t.Name())
		sb.WriteByte('{')
		first := true
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			if !first {
				sb.WriteString(", ")
			}
			first = false
			sb.WriteString(t.Field(i).Name + ": ")
			writeValue(sb, v.Field(i), depth+1, short)
		}
		sb.WriteByte('}')
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			sb.WriteString(formatBytes(b, short))
			return
		}
		sb.WriteByte('[')
		n := v.Len()
		if short && n > shortItems {
			n = shownItems
		}
		for i := range n {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeValue(sb, v.Index(i), depth+1, short)
		}
		if n < v.Len() {
			fmt.Fprintf(sb, ", ... (%d items)", v.Len())
		}
		sb.WriteByte(']')
	case reflect.String:
		if s := v.String(); short && len(s) > shortString {
			fmt.Fprintf(sb, "%s... (%d bytes)", strconv.Quote(strings.ToValidUTF8(s[:shortString], "")), len(s))
			return
		}
		sb.WriteString(strconv.Quote(v.String()))
	default:
		if v.Type().Implements(stringerType) && v.Type().PkgPath() != "" && v.Kind() == reflect.Uint8 {
			// A generated enum.
			sb.WriteString(v.Interface().(fmt.Stringer).String())
			return
		}
		fmt.Fprint(sb, v.Interface())
	}
}
