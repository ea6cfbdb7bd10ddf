// JSON the way the Python reference writes and reads it.
//
// The handover topic's keys and values and the commit marks are compared byte for byte across languages
// (a compacted topic keeps one value per key; an `ack` must repeat exactly the key the replay wrote), so
// this file reproduces Python's `json.dumps(..., separators=(",", ":"), ensure_ascii=False)`: no spaces,
// non-ASCII written as is, only `"`, `\` and control characters escaped, object members in insertion
// order. encoding/json differs in all the ways that matter here (it escapes <, >, &, U+2028 and sorts map
// keys), so it is used for parsing only.
package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Object is a JSON object that keeps the order of its members (Python dicts do, and the wire format
// depends on it).
type Object struct {
	Keys   []string
	Values map[string]any
}

// NewObject returns an empty ordered object.
func NewObject() *Object { return &Object{Values: map[string]any{}} }

// Set adds or replaces a member, keeping the position of an existing one.
func (o *Object) Set(key string, value any) *Object {
	if _, ok := o.Values[key]; !ok {
		o.Keys = append(o.Keys, key)
	}
	o.Values[key] = value
	return o
}

// Get returns a member and whether it exists.
func (o *Object) Get(key string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.Values[key]
	return v, ok
}

// ParseOrdered parses JSON into nil, bool, json.Number, string, []any and *Object.
func ParseOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	value, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("extra data after the JSON value")
	}
	return value, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := NewObject()
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := keyTok.(string)
				value, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				obj.Set(key, value)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			list := []any{}
			for dec.More() {
				value, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, value)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil
	}
}

// Dumps encodes a value as Python's compact `json.dumps(..., ensure_ascii=False)` would.
// Accepted: nil, bool, string, int/int32/int64, float64, json.Number, []any, []string, *Object,
// map[string]any (keys sorted: only for values whose order nobody compares).
func Dumps(value any) []byte {
	var b bytes.Buffer
	writeValue(&b, value)
	return b.Bytes()
}

func writeValue(b *bytes.Buffer, value any) {
	switch v := value.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		writeString(b, v)
	case int:
		b.WriteString(strconv.Itoa(v))
	case int32:
		b.WriteString(strconv.FormatInt(int64(v), 10))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case *int64:
		if v == nil {
			b.WriteString("null")
		} else {
			b.WriteString(strconv.FormatInt(*v, 10))
		}
	case float64:
		b.WriteString(pyFloat(v))
	case json.Number:
		b.WriteString(pyNumber(v))
	case []any:
		b.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValue(b, item)
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, item)
		}
		b.WriteByte(']')
	case *Object:
		b.WriteByte('{')
		if v != nil {
			for i, key := range v.Keys {
				if i > 0 {
					b.WriteByte(',')
				}
				writeString(b, key)
				b.WriteByte(':')
				writeValue(b, v.Values[key])
			}
		}
		b.WriteByte('}')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		obj := NewObject()
		for _, k := range keys {
			obj.Set(k, v[k])
		}
		writeValue(b, obj)
	default:
		panic(fmt.Sprintf("protocol.Dumps: unsupported %T", value))
	}
}

func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyNumber writes a parsed number the way Python re-serialises it: integers as written, floats by repr.
func pyNumber(n json.Number) string {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		return strings.TrimPrefix(s, "+")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return pyFloat(f)
}

// pyFloat is Python's float repr: the shortest round-trip digits, in exponent form below 1e-4 and from 1e16.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// validUTF8 says whether bytes decode as UTF-8 the way Python's strict decoder does.
func validUTF8(b []byte) bool { return utf8.Valid(b) }
