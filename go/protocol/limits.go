// The size and nesting limits of handover records and of the record values a filter parses (HANDOVER.md
// section 2, "Limits", and section 4, steps 5 and 8), and the exact depth check.
//
// Every JSON parser has a nesting limit of its own (encoding/json 10 000, the token reader of ParseOrdered
// none, Python about 1000, Jackson 1000), so a record between them was data in one language and
// undecodable, or a crash, in another. The protocol's limits are far below all of them, and each port
// checks them itself before its parser runs, so all ports agree at the boundary.
package protocol

const (
	// MaxDepth is the deepest nesting of a handover record's key or value, and of a record value a JSON
	// filter parses: `1` is depth 0, `[]` depth 1, `{"a":[1]}` depth 2.
	MaxDepth = 64
	// MaxRecordKeyBytes is the longest handover-record key.
	MaxRecordKeyBytes = 4096
	// MaxRecordValueBytes is the longest handover-record value: Kafka's default max.message.bytes.
	MaxRecordValueBytes = 1 << 20
	// MaxFilterValueBytes is the longest record value a JSON filter reads; longer is undecodable.
	MaxFilterValueBytes = 1 << 20
)

// TooDeep says whether JSON text nests deeper than limit. Exact for valid JSON; on other bytes any answer
// will do, because the parser refuses them anyway (too deep and not JSON give the same result). One pass,
// no recursion: brackets inside strings (escapes included) are not nesting.
func TooDeep(text []byte, limit int) bool {
	depth := 0
	inString := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte: `\"` does not end the string, `\\` is one character
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > limit {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}
