// The size and nesting limits of handover records and of the record values a filter parses (HANDOVER.md
// section 2, "Limits", and section 4, steps 5 and 8), and the exact check of them.
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
	// MaxIntegerDigits is the longest integer literal (digits, without the sign) the protocol reads: Python's
	// own default limit. encoding/json has none, Jackson's default was 1000 characters for any number.
	MaxIntegerDigits = 4300
)

// BeyondLimits says whether JSON text nests deeper than MaxDepth or holds an integer literal of more than
// MaxIntegerDigits digits. Exact for valid JSON; on other bytes any answer will do, because the parser refuses
// them anyway (beyond a limit and not JSON give the same result). One pass, no recursion: brackets and digits
// inside strings (escapes included) do not count.
func BeyondLimits(text []byte) bool {
	depth, digits := 0, 0
	inString, inNumber, fraction := false, false, false
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
		if inNumber {
			switch {
			case c >= '0' && c <= '9':
				digits++
				continue
			case c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-':
				fraction = true // a fraction or an exponent: not an integer literal, no digit limit
				continue
			}
			inNumber = false
			if !fraction && digits > MaxIntegerDigits {
				return true
			}
		}
		switch {
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > MaxDepth {
				return true
			}
		case c == ']' || c == '}':
			depth--
		case c == '-' || (c >= '0' && c <= '9'):
			inNumber, fraction, digits = true, false, 0
			if c != '-' {
				digits = 1
			}
		}
	}
	return inNumber && !fraction && digits > MaxIntegerDigits
}
