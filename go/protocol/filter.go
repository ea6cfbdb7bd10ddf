// The filter of HANDOVER.md section 4: which records a replay covers, so which records the guard may skip.
//
// Both sides must agree on every record, so this is a faithful reading of replay_worker/protocol/filters.py,
// including its byte shortcuts (a value without the expected string's bytes cannot match and is not parsed;
// the one-string-field filter is answered from the bytes when the record opens with that field). The
// shortcuts decide what an unparseable value means in some cases, so they are part of the contract, and the
// conformance vectors pin them.
package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrFilterSpec is wrapped by every error about a filter spec that cannot be understood.
var ErrFilterSpec = errors.New("bad filter")

// ErrUndecodable is returned by Match when a JSON condition cannot be evaluated because the value is not
// JSON: a poison record, which the replay covers (dead-letters) and the guard therefore skips.
var ErrUndecodable = errors.New("value is not JSON")

// Header is one record header (a nil Value is a header without a value).
type Header struct {
	Key   string
	Value []byte
}

// JSONMatch is one JSON condition: the field at Path equals one of Values, or (Exists set) exists or not.
type JSONMatch struct {
	Path   []string
	Values []any
	Exists *bool
}

// FilterSpec is the filter as configured or published.
type FilterSpec struct {
	Headers     []HeaderCondition
	Keys        []string
	HasKeys     bool
	KeysFile    string
	JSONMatches []JSONMatch
}

// HeaderCondition: some header named Name has one of Values.
type HeaderCondition struct {
	Name   string
	Values []string
}

// FilterSpecError is a filter that cannot be understood: Field names the part at fault
// (`filter.json[0].in`) and Code says what is wrong, in words the same in every language.
type FilterSpecError struct {
	Field   string
	Code    string
	Message string
}

func (e *FilterSpecError) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrFilterSpec) true.
func (e *FilterSpecError) Unwrap() error { return ErrFilterSpec }

func specError(field, code, format string, args ...any) error {
	return &FilterSpecError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ParseFilterSpec reads a filter from JSON text or a parsed value (nil or "" is the empty filter).
func ParseFilterSpec(obj any, what string) (FilterSpec, error) {
	if what == "" {
		what = "filter"
	}
	if obj == nil || obj == "" {
		return FilterSpec{}, nil
	}
	if raw, ok := obj.([]byte); ok {
		obj = string(raw)
	}
	if text, ok := obj.(string); ok {
		parsed, err := ParseOrdered([]byte(text))
		if err != nil {
			return FilterSpec{}, specError(what, "not-json", "%s: not valid JSON (%v)", what, err)
		}
		obj = parsed
	}
	body, ok := obj.(*Object)
	if !ok {
		return FilterSpec{}, specError(what, "not-an-object", "%s: expected a JSON object with headers, keys, keysFile or json", what)
	}
	var unknown []string
	for _, k := range body.Keys {
		switch k {
		case "headers", "keys", "keysFile", "json":
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return FilterSpec{}, specError(what+"."+unknown[0], "unknown-field", "%s: unknown field(s) %s; known: headers, keys, keysFile, json", what, strings.Join(unknown, ", "))
	}
	var spec FilterSpec
	if raw, _ := body.Get("headers"); truthy(raw) {
		headers, ok := raw.(*Object)
		if !ok {
			return FilterSpec{}, specError(what+".headers", "bad-headers", `%s.headers: expected {"name": ["value", ...]}`, what)
		}
		for _, name := range headers.Keys {
			values := headers.Values[name]
			if s, isStr := values.(string); isStr {
				values = []any{s}
			}
			list, isList := values.([]any)
			if !isList || len(list) == 0 {
				return FilterSpec{}, specError(what+".headers."+name, "bad-header-values", "%s.headers.%s: expected a string or a non-empty list of strings", what, name)
			}
			cond := HeaderCondition{Name: name}
			for _, v := range list {
				s, isStr := v.(string)
				if !isStr {
					return FilterSpec{}, specError(what+".headers."+name, "bad-header-values", "%s.headers.%s: expected a string or a non-empty list of strings", what, name)
				}
				cond.Values = append(cond.Values, s)
			}
			spec.Headers = append(spec.Headers, cond)
		}
	}
	if raw, ok := body.Get("keys"); ok && raw != nil {
		list, isList := raw.([]any)
		if !isList {
			return FilterSpec{}, specError(what+".keys", "bad-keys", "%s.keys: expected a list of strings", what)
		}
		spec.HasKeys = true
		spec.Keys = []string{}
		for _, k := range list {
			s, isStr := k.(string)
			if !isStr {
				return FilterSpec{}, specError(what+".keys", "bad-keys", "%s.keys: expected a list of strings", what)
			}
			spec.Keys = append(spec.Keys, s)
		}
	}
	if raw, ok := body.Get("keysFile"); ok && raw != nil {
		s, isStr := raw.(string)
		if !isStr {
			return FilterSpec{}, specError(what+".keysFile", "bad-keys-file", "%s.keysFile: expected a path", what)
		}
		spec.KeysFile = s
	}
	var conditions []any
	if raw, _ := body.Get("json"); truthy(raw) {
		switch v := raw.(type) {
		case *Object:
			conditions = []any{v}
		case []any:
			conditions = v
		default:
			return FilterSpec{}, specError(what+".json", "bad-json", "%s.json: expected a list of {path, equals|in|exists}", what)
		}
	}
	for index, raw := range conditions {
		where := fmt.Sprintf("%s.json[%d]", what, index)
		cond, ok := raw.(*Object)
		var path string
		isStr := false
		if ok {
			path, isStr = cond.Values["path"].(string)
		}
		if !ok || !isStr || path == "" {
			return FilterSpec{}, specError(where, "bad-condition", `%s: expected {"path": "a.b", "equals": value} (or in / exists)`, where)
		}
		var ops []string
		for _, op := range []string{"equals", "in", "exists"} {
			if _, has := cond.Get(op); has {
				ops = append(ops, op)
			}
		}
		if len(ops) != 1 {
			return FilterSpec{}, specError(where, "bad-operator", "%s: give exactly one of equals, in, exists", where)
		}
		match := JSONMatch{Path: strings.Split(path, ".")}
		switch ops[0] {
		case "equals":
			match.Values = []any{cond.Values["equals"]}
		case "in":
			list, isList := cond.Values["in"].([]any)
			if !isList || len(list) == 0 {
				return FilterSpec{}, specError(where+".in", "bad-in", "%s.in: expected a non-empty list", where)
			}
			match.Values = list
		default:
			exists, isBool := cond.Values["exists"].(bool)
			if !isBool {
				// "false" (a string) must not read as true: a guard would skip what the replay ignores.
				return FilterSpec{}, specError(where+".exists", "bad-exists", "%s.exists: expected true or false", where)
			}
			match.Exists = &exists
		}
		spec.JSONMatches = append(spec.JSONMatches, match)
	}
	return spec, nil
}

// Empty says whether the spec has no condition.
func (s FilterSpec) Empty() bool {
	return len(s.Headers) == 0 && !s.HasKeys && s.KeysFile == "" && len(s.JSONMatches) == 0
}

// AllKeys is the key set: Keys plus the non-blank lines of KeysFile.
func (s FilterSpec) AllKeys() (map[string]struct{}, error) {
	keys := map[string]struct{}{}
	for _, k := range s.Keys {
		keys[k] = struct{}{}
	}
	if s.KeysFile != "" {
		text, err := os.ReadFile(s.KeysFile)
		if err != nil {
			return nil, specError("filter.keysFile", "keys-file-unreadable", "filter.keysFile %s: cannot read it (%v)", s.KeysFile, err)
		}
		for _, line := range strings.Split(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				keys[line] = struct{}{}
			}
		}
	}
	return keys, nil
}

// ToObject is the JSON form; inlineKeys reads keysFile into keys (what the handover topic publishes: the
// guard cannot read a file mounted into the replay's pods).
func (s FilterSpec) ToObject(inlineKeys bool) (*Object, error) {
	body := NewObject()
	if len(s.Headers) > 0 {
		headers := NewObject()
		for _, h := range s.Headers {
			headers.Set(h.Name, append([]string{}, h.Values...))
		}
		body.Set("headers", headers)
	}
	if inlineKeys && (s.HasKeys || s.KeysFile != "") {
		all, err := s.AllKeys()
		if err != nil {
			return nil, err
		}
		sorted := make([]string, 0, len(all))
		for k := range all {
			sorted = append(sorted, k)
		}
		sort.Slice(sorted, func(i, j int) bool { return pyLess(sorted[i], sorted[j]) })
		body.Set("keys", sorted)
	} else {
		if s.HasKeys {
			body.Set("keys", append([]string{}, s.Keys...))
		}
		if s.KeysFile != "" {
			body.Set("keysFile", s.KeysFile)
		}
	}
	if len(s.JSONMatches) > 0 {
		list := []any{}
		for _, m := range s.JSONMatches {
			cond := NewObject().Set("path", strings.Join(m.Path, "."))
			switch {
			case m.Exists != nil:
				cond.Set("exists", *m.Exists)
			case len(m.Values) == 1:
				cond.Set("equals", m.Values[0])
			default:
				cond.Set("in", append([]any{}, m.Values...))
			}
			list = append(list, cond)
		}
		body.Set("json", list)
	}
	return body, nil
}

// PublishedFilter compiles the filter of a `replay` record as a guard evaluates it. The record carries the
// key set inline; a keysFile names a file in the replay's pods that no guard can read, so it is refused.
func PublishedFilter(obj any) (*RecordFilter, error) {
	spec, err := ParseFilterSpec(obj, "")
	if err != nil {
		return nil, err
	}
	if spec.KeysFile != "" {
		return nil, specError("filter.keysFile", "keys-file-not-published",
			"filter.keysFile: a published filter carries its keys inline (keys), not a file")
	}
	return CompileFilter(spec)
}

// pyLess orders strings by code point, as Python's sorted() does (Go compares UTF-8 bytes, the same order).
func pyLess(a, b string) bool { return a < b }

// ---------------------------------------------------------------------------------------------- compiled

type compiledJSON struct {
	path   []string
	values []any
	exists *bool
	// needles: byte strings of which one must occur in the raw value; nil when no shortcut is safe.
	needles [][]byte
}

// RecordFilter is a compiled FilterSpec.
type RecordFilter struct {
	headers    map[string]map[string]struct{}
	headerList []string
	keys       map[string]struct{}
	hasKeys    bool
	conditions []compiledJSON
	single     func(value []byte) (bool, error)
}

// CompileFilter compiles a spec (reading its keys file, if any).
func CompileFilter(spec FilterSpec) (*RecordFilter, error) {
	f := &RecordFilter{headers: map[string]map[string]struct{}{}}
	for _, h := range spec.Headers {
		accepted := map[string]struct{}{}
		for _, v := range h.Values {
			accepted[v] = struct{}{}
		}
		if _, seen := f.headers[h.Name]; !seen {
			f.headerList = append(f.headerList, h.Name)
		}
		f.headers[h.Name] = accepted
	}
	if spec.HasKeys || spec.KeysFile != "" {
		keys, err := spec.AllKeys()
		if err != nil {
			return nil, err
		}
		f.keys, f.hasKeys = keys, true
	}
	for _, m := range spec.JSONMatches {
		c := compiledJSON{path: m.Path, values: m.Values, exists: m.Exists}
		if m.Exists == nil {
			var needles [][]byte
			all := true
			for _, v := range m.Values {
				n := needle(v)
				if n == nil {
					all = false
					break
				}
				needles = append(needles, n)
			}
			if all {
				c.needles = needles
			}
		}
		f.conditions = append(f.conditions, c)
	}
	f.single = f.singleStringField()
	return f, nil
}

// MatchesEverything says whether the filter has no condition.
func (f *RecordFilter) MatchesEverything() bool {
	return len(f.headers) == 0 && !f.hasKeys && len(f.conditions) == 0
}

// NeedsHeaders says whether Match reads the headers (a caller may skip building them otherwise).
func (f *RecordFilter) NeedsHeaders() bool { return len(f.headers) > 0 && f.single == nil }

// Match says whether the replay covers the record. ErrUndecodable (wrapped) when a JSON condition cannot be
// evaluated because the value is not JSON. A nil key or value is a null one (a tombstone).
func (f *RecordFilter) Match(key []byte, headers []Header, value []byte) (bool, error) {
	if f.single != nil {
		return f.single(value)
	}
	if f.hasKeys {
		if key == nil {
			return false, nil
		}
		if _, ok := f.keys[string(key)]; !ok {
			return false, nil
		}
	}
	if len(f.headers) > 0 {
		if len(headers) == 0 {
			return false, nil
		}
		for _, name := range f.headerList {
			accepted := f.headers[name]
			found := false
			for _, h := range headers {
				if h.Key == name && h.Value != nil {
					if _, ok := accepted[string(h.Value)]; ok {
						found = true
						break
					}
				}
			}
			if !found {
				return false, nil
			}
		}
	}
	if len(f.conditions) == 0 {
		return true, nil
	}
	if value == nil {
		for _, c := range f.conditions {
			if c.exists == nil || *c.exists {
				return false, nil
			}
		}
		return true, nil
	}
	if len(value) > MaxFilterValueBytes {
		return false, fmt.Errorf("%w: a value of %d bytes, more than %d", ErrUndecodable, len(value), MaxFilterValueBytes)
	}
	if bytes.IndexByte(value, '\\') < 0 {
		for _, c := range f.conditions {
			if c.needles == nil {
				continue
			}
			found := false
			for _, n := range c.needles {
				if bytes.Contains(value, n) {
					found = true
					break
				}
			}
			if !found {
				return false, nil
			}
		}
	}
	document, err := ParseValue(value)
	if err != nil {
		return false, err
	}
	for _, c := range f.conditions {
		found, ok := lookup(document, c.path)
		if c.exists != nil {
			if ok != *c.exists {
				return false, nil
			}
			continue
		}
		if !ok {
			return false, nil
		}
		any := false
		for _, v := range c.values {
			if jsonEqual(found, v) {
				any = true
				break
			}
		}
		if !any {
			return false, nil
		}
	}
	return true, nil
}

// Matches is Match with an undecodable value counting as covered (HANDOVER.md section 4: the replay
// dead-letters it, so the guard skips it; neither side leaves it to the other).
func (f *RecordFilter) Matches(key []byte, headers []Header, value []byte) bool {
	ok, err := f.Match(key, headers, value)
	return ok || err != nil
}

func (f *RecordFilter) singleStringField() func([]byte) (bool, error) {
	if len(f.headers) > 0 || f.hasKeys || len(f.conditions) != 1 {
		return nil
	}
	c := f.conditions[0]
	if len(c.path) != 1 || c.exists != nil || len(c.values) != 1 || c.needles == nil {
		return nil
	}
	wanted, ok := c.values[0].(string)
	if !ok {
		return nil
	}
	return stringFieldPredicate(c.path[0], wanted, c.needles[0])
}

// stringFieldPredicate answers "top-level field key equals the string wanted" from the bytes when the value
// is compact JSON opening with that field and naming the key nowhere after it (see filters.py).
func stringFieldPredicate(key, wanted string, needleBytes []byte) func([]byte) (bool, error) {
	keyToken := Dumps(key)
	head := append(append([]byte("{"), keyToken...), ':')
	start := len(head)
	opens := append(append([]byte{}, head...), '"')
	hitComma := append(append(append([]byte{}, head...), needleBytes...), ',')
	hitBrace := append(append(append([]byte{}, head...), needleBytes...), '}')
	return func(value []byte) (bool, error) {
		if value == nil {
			return false, nil
		}
		if len(value) > MaxFilterValueBytes {
			return false, fmt.Errorf("%w: a value of %d bytes, more than %d", ErrUndecodable, len(value), MaxFilterValueBytes)
		}
		if bytes.IndexByte(value, '\\') < 0 {
			if bytes.HasPrefix(value, opens) && bytes.LastIndex(value[start:], keyToken) < 0 {
				if bytes.HasPrefix(value, hitComma) || bytes.HasPrefix(value, hitBrace) {
					return true, nil
				}
				if !bytes.HasPrefix(value[start:], needleBytes) {
					return false, nil
				}
			} else if !bytes.Contains(value, needleBytes) {
				return false, nil
			}
		}
		document, err := ParseValue(value)
		if err != nil {
			return false, err
		}
		obj, ok := document.(map[string]any)
		if !ok {
			return false, nil
		}
		found, ok := obj[key].(string)
		return ok && found == wanted, nil
	}
}

// needle is the bytes a JSON string value must appear as, when that is certain (no character JSON escapes).
func needle(value any) []byte {
	s, ok := value.(string)
	if !ok {
		return nil
	}
	for _, r := range s {
		if r == '"' || r == '\\' || r < 0x20 {
			return nil
		}
	}
	return []byte(`"` + s + `"`)
}

// ParseValue parses a record value the way Python's json.loads does with its encoding detection: UTF-8
// (with or without a BOM), UTF-16 and UTF-32. Objects become map[string]any, numbers json.Number.
func ParseValue(value []byte) (any, error) {
	text, err := decodeJSONBytes(value)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	if BeyondLimits([]byte(text)) {
		// Checked in the decoded text (UTF-16 too), before encoding/json, whose own depth limit is 10 000.
		return nil, fmt.Errorf("%w: nested deeper than %d or an integer of more than %d digits", ErrUndecodable,
			MaxDepth, MaxIntegerDigits)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var document any
	if err := dec.Decode(&document); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: extra data", ErrUndecodable)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: extra data", ErrUndecodable)
	}
	return document, nil
}

func decodeJSONBytes(b []byte) (string, error) {
	first := byte(1)
	if len(b) > 0 {
		first = b[0]
	}
	if !(first == 0xef || first == 0x00 || first == 0xff || first == 0xfe || (len(b) > 1 && b[1] == 0)) {
		if !utf8.Valid(b) {
			return "", errors.New("invalid UTF-8")
		}
		return string(b), nil
	}
	switch {
	case bytes.HasPrefix(b, []byte{0x00, 0x00, 0xfe, 0xff}):
		return utf32(b[4:], binary.BigEndian)
	case bytes.HasPrefix(b, []byte{0xff, 0xfe, 0x00, 0x00}):
		return utf32(b[4:], binary.LittleEndian)
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		return utf16s(b[2:], binary.BigEndian)
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		return utf16s(b[2:], binary.LittleEndian)
	case bytes.HasPrefix(b, []byte{0xef, 0xbb, 0xbf}):
		if !utf8.Valid(b[3:]) {
			return "", errors.New("invalid UTF-8")
		}
		return string(b[3:]), nil
	}
	if len(b) >= 4 {
		if b[0] == 0 {
			if b[1] != 0 {
				return utf16s(b, binary.BigEndian)
			}
			return utf32(b, binary.BigEndian)
		}
		if b[1] == 0 {
			if b[2] != 0 || b[3] != 0 {
				return utf16s(b, binary.LittleEndian)
			}
			return utf32(b, binary.LittleEndian)
		}
	} else if len(b) == 2 {
		if b[0] == 0 {
			return utf16s(b, binary.BigEndian)
		}
		if b[1] == 0 {
			return utf16s(b, binary.LittleEndian)
		}
	}
	if !utf8.Valid(b) {
		return "", errors.New("invalid UTF-8")
	}
	return string(b), nil
}

func utf16s(b []byte, order binary.ByteOrder) (string, error) {
	if len(b)%2 != 0 {
		return "", errors.New("truncated UTF-16")
	}
	units := make([]uint16, len(b)/2)
	for i := range units {
		units[i] = order.Uint16(b[2*i:])
	}
	return string(utf16.Decode(units)), nil
}

func utf32(b []byte, order binary.ByteOrder) (string, error) {
	if len(b)%4 != 0 {
		return "", errors.New("truncated UTF-32")
	}
	runes := make([]rune, len(b)/4)
	for i := range runes {
		r := order.Uint32(b[4*i:])
		if r > utf8.MaxRune {
			return "", errors.New("invalid UTF-32")
		}
		runes[i] = rune(r)
	}
	return string(runes), nil
}

func lookup(document any, path []string) (any, bool) {
	node := document
	for _, step := range path {
		switch n := node.(type) {
		case map[string]any:
			next, ok := n[step]
			if !ok {
				return nil, false
			}
			node = next
		case []any:
			if !isDigits(step) {
				return nil, false
			}
			index, err := strconv.Atoi(step)
			if err != nil || index >= len(n) {
				return nil, false
			}
			node = n[index]
		default:
			return nil, false
		}
	}
	return node, true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// jsonEqual: JSON equality where `true` is not `1` but `1` is `1.0`, inside arrays and objects too.
func jsonEqual(a, b any) bool {
	_, aBool := a.(bool)
	_, bBool := b.(bool)
	if aBool || bBool {
		return aBool && bBool && a == b
	}
	_, aNum := a.(json.Number)
	_, bNum := b.(json.Number)
	if aNum || bNum {
		return aNum && bNum && pyEqual(a, b)
	}
	if x, ok := a.([]any); ok {
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if xm := asMap(a); xm != nil {
		ym := asMap(b)
		if ym == nil || len(xm) != len(ym) {
			return false
		}
		for k, v := range xm {
			w, ok := ym[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return sameKind(a, b) && pyEqual(a, b)
}

func sameKind(a, b any) bool {
	switch a.(type) {
	case nil:
		return b == nil
	case string:
		_, ok := b.(string)
		return ok
	case []any:
		_, ok := b.([]any)
		return ok
	case map[string]any, *Object:
		switch b.(type) {
		case map[string]any, *Object:
			return true
		}
	}
	return false
}

// pyEqual is Python's == on parsed JSON (inside lists and objects booleans equal numbers: True == 1).
func pyEqual(a, b any) bool {
	if ra, ok := pyRat(a); ok {
		rb, ok := pyRat(b)
		return ok && ra.Cmp(rb) == 0
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any, *Object:
		xm, ym := asMap(a), asMap(b)
		if xm == nil || ym == nil || len(xm) != len(ym) {
			return false
		}
		for k, v := range xm {
			w, ok := ym[k]
			if !ok || !pyEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

func asMap(v any) map[string]any {
	switch m := v.(type) {
	case map[string]any:
		return m
	case *Object:
		return m.Values
	}
	return nil
}

// pyRat is the exact value of a JSON number or boolean (a float literal as the float64 Python makes of it).
func pyRat(v any) (*big.Rat, bool) {
	switch n := v.(type) {
	case bool:
		if n {
			return big.NewRat(1, 1), true
		}
		return big.NewRat(0, 1), true
	case json.Number:
		s := string(n)
		if strings.ContainsAny(s, ".eE") {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, false
			}
			r := new(big.Rat)
			if r.SetFloat64(f) == nil {
				return nil, false
			}
			return r, true
		}
		r, ok := new(big.Rat).SetString(s)
		return r, ok
	case float64:
		r := new(big.Rat)
		if r.SetFloat64(n) == nil {
			return nil, false
		}
		return r, true
	case int64:
		return big.NewRat(n, 1), true
	case int:
		return big.NewRat(int64(n), 1), true
	}
	return nil, false
}
