package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/gen"
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
	// decoded value; for a value no schema describes, Value is its bytes
	// as a tuple or x:HEX.
	Record string `json:"record,omitempty"`
	Value  string `json:"value"`
	// Rev is the value's revision: the first 8 bytes of its SHA-256, in
	// hex. A repair's -expect takes it, so that a row that changed since it
	// was shown is refused.
	Rev string `json:"rev"`
	// Corrupt is the decoder's reason when the key or the value does not
	// decode as its class says.
	Corrupt string `json:"corrupt,omitempty"`
}

// rev is a value's revision (see Row.Rev).
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
	row := Row{Key: formatTuple(key), Value: formatTuple(value), Rev: rev(value)}
	if len(value) == 0 {
		row.Value = `""`
	}
	kc, ks, ok := classOf(s, key)
	if !ok {
		return row
	}
	row.Class = kc.Name
	k, err := kc.Parse(key)
	if err != nil {
		row.Corrupt = err.Error()
	} else {
		row.Parsed = formatValue(reflect.ValueOf(k))
	}
	var recordName string
	var decode func([]byte) (any, error)
	switch {
	case kc.Tag == uint32(gen.TagQuarantineValueKey) && ks.Namespace == gen.SchemaNamespace && err == nil:
		// The moved row's own value, decoded as its own key's class says.
		inner := decodeRow(s, k.(gen.QuarantineValueKey).Key, value)
		row.Record, row.Value = inner.Record, inner.Value
		if row.Corrupt == "" {
			row.Corrupt = inner.Corrupt
		}
		return row
	case kc.Tag == uint32(gen.TagTimerKey) && ks.Namespace == gen.SchemaNamespace && err == nil:
		recordName, decode = timerValueDecoder(k.(gen.TimerKey).Kind)
	case len(kc.Values) > 0:
		// The record of the class's value family that the value's version
		// names: a row is shown as it is stored, never upgraded.
		rec, verr := ks.ValueRecord(kc, value)
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
	row.Record, row.Value = recordName, formatValue(reflect.ValueOf(v))
	return row
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
func formatValue(v reflect.Value) string {
	var sb strings.Builder
	writeValue(&sb, v, 0)
	return sb.String()
}

var stringerType = reflect.TypeFor[fmt.Stringer]()

func writeValue(sb *strings.Builder, v reflect.Value, depth int) {
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
		writeValue(sb, v.Elem(), depth+1)
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
			writeValue(sb, v.Field(i), depth+1)
		}
		sb.WriteByte('}')
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			if len(b) == 0 {
				sb.WriteString(`""`)
			} else {
				sb.WriteString(formatTuple(b))
			}
			return
		}
		sb.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeValue(sb, v.Index(i), depth+1)
		}
		sb.WriteByte(']')
	case reflect.String:
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
