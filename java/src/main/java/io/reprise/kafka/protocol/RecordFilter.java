package io.reprise.kafka.protocol;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * A compiled {@link FilterSpec}: which records a replay covers, so which ones the guard may skip
 * (HANDOVER.md section 4). Every condition must hold; inside one condition any listed value will do; an empty
 * filter matches everything. Headers and keys compare UTF-8 bytes; JSON conditions parse the value, with JSON
 * equality ({@code true != 1}, {@code 1 == 1.0}). A tombstone matches JSON conditions only if all are
 * {@code exists:false}. A value that is not JSON raises {@link UndecodableValueException}: the guard counts
 * it as matching (the replay dead-letters it).
 *
 * <p>The byte shortcuts are the reference's, kept so that both sides answer alike on every input: a JSON
 * string condition cannot hold when the value (free of backslashes, so no character is escaped) does not
 * contain the string's literal bytes; and the one-top-level-string filter is answered from the bytes when the
 * compact value opens with that field.
 */
public final class RecordFilter {

    public static final RecordFilter MATCH_ALL = new RecordFilter(Map.of(), null, List.of());

    private record Compiled(List<String> path, List<JsonNode> values, Boolean exists, List<byte[]> needles) {}

    private final Map<String, Set<Bytes>> headers;
    private final Set<Bytes> keys;
    private final List<Compiled> conditions;
    private final SingleStringField single;

    private RecordFilter(Map<String, Set<Bytes>> headers, Set<Bytes> keys, List<Compiled> conditions) {
        this.headers = headers;
        this.keys = keys;
        this.conditions = conditions;
        this.single = singleStringField();
    }

    public static RecordFilter compile(FilterSpec spec) throws FilterSpecException {
        Map<String, Set<Bytes>> headers = new LinkedHashMap<>();
        spec.headers().forEach((name, values) -> {
            Set<Bytes> accepted = new HashSet<>();
            values.forEach(v -> accepted.add(Bytes.of(v)));
            headers.put(name, accepted);
        });
        Set<Bytes> keys = null;
        if (spec.keys() != null || spec.keysFile() != null) {
            keys = new HashSet<>();
            for (String key : allKeys(spec)) {
                keys.add(Bytes.of(key));
            }
        }
        List<Compiled> compiled = new ArrayList<>();
        for (FilterSpec.JsonCondition c : spec.json()) {
            List<byte[]> needles = null;
            if (c.exists() == null) {
                List<byte[]> found = new ArrayList<>();
                for (JsonNode v : c.values()) {
                    byte[] needle = needle(v);
                    if (needle == null) {
                        found = null;
                        break;
                    }
                    found.add(needle);
                }
                needles = found;
            }
            compiled.add(new Compiled(c.path(), c.values(), c.exists(), needles));
        }
        return new RecordFilter(headers, keys, compiled);
    }

    public static RecordFilter compile(JsonNode spec) throws FilterSpecException {
        return compile(FilterSpec.parse(spec));
    }

    /**
     * The filter of a {@code replay} record, compiled as a guard evaluates it. The record carries the key set
     * inline; a {@code keysFile} names a file in the replay's pods that no guard can read, so it is refused (a guard
     * that cannot evaluate the filter skips nothing for that replay; HANDOVER.md section 4).
     */
    public static RecordFilter published(JsonNode spec) throws FilterSpecException {
        FilterSpec parsed = FilterSpec.parse(spec);
        if (parsed.keysFile() != null) {
            throw new FilterSpecException(
                    "filter.keysFile: a published filter carries its keys inline (keys), not a file",
                    "filter.keysFile",
                    "keys-file-not-published");
        }
        return compile(parsed);
    }

    private static Set<String> allKeys(FilterSpec spec) throws FilterSpecException {
        Set<String> keys = new HashSet<>(spec.keys() == null ? List.of() : spec.keys());
        if (spec.keysFile() != null && !spec.keysFile().isEmpty()) {
            try {
                for (String line : Files.readAllLines(Path.of(spec.keysFile()), StandardCharsets.UTF_8)) {
                    if (!line.strip().isEmpty()) {
                        keys.add(line.strip());
                    }
                }
            } catch (IOException e) {
                throw new FilterSpecException(
                        "filter.keysFile " + spec.keysFile() + ": cannot read it (" + e.getMessage() + ")",
                        "filter.keysFile",
                        "keys-file-unreadable");
            }
        }
        return keys;
    }

    public boolean matchesEverything() {
        return headers.isEmpty() && keys == null && conditions.isEmpty();
    }

    /**
     * True when the replay acts on this record.
     *
     * @throws UndecodableValueException a JSON condition cannot be evaluated because the value is not JSON
     */
    public boolean matches(byte[] key, Headers recordHeaders, byte[] value) throws UndecodableValueException {
        if (single != null) {
            return single.matches(value);
        }
        if (keys != null && (key == null || !keys.contains(new Bytes(key)))) {
            return false;
        }
        if (!headers.isEmpty()) {
            if (recordHeaders == null) {
                return false;
            }
            for (Map.Entry<String, Set<Bytes>> wanted : headers.entrySet()) {
                boolean found = false;
                for (Header h : recordHeaders) {
                    if (h.key().equals(wanted.getKey())
                            && h.value() != null
                            && wanted.getValue().contains(new Bytes(h.value()))) {
                        found = true;
                        break;
                    }
                }
                if (!found) {
                    return false;
                }
            }
        }
        if (conditions.isEmpty()) {
            return true;
        }
        if (value == null) {
            // A tombstone has no fields: a JSON condition cannot hold (not a poison record).
            for (Compiled c : conditions) {
                if (!Boolean.FALSE.equals(c.exists())) {
                    return false;
                }
            }
            return true;
        }
        tooLarge(value);
        if (indexOf(value, BACKSLASH, 0) < 0) {
            for (Compiled c : conditions) {
                if (c.needles() != null) {
                    boolean any = false;
                    for (byte[] n : c.needles()) {
                        if (indexOf(value, n, 0) >= 0) {
                            any = true;
                            break;
                        }
                    }
                    if (!any) {
                        return false;
                    }
                }
            }
        }
        JsonNode document = parse(value);
        for (Compiled c : conditions) {
            JsonNode found = lookup(document, c.path());
            if (c.exists() != null) {
                if ((found != null) != c.exists()) {
                    return false;
                }
            } else {
                if (found == null) {
                    return false;
                }
                boolean any = false;
                for (JsonNode v : c.values()) {
                    if (JsonEquality.equal(found, v)) {
                        any = true;
                        break;
                    }
                }
                if (!any) {
                    return false;
                }
            }
        }
        return true;
    }

    /** HANDOVER.md section 4, step 5: a value above the size limit is undecodable before any other test of it. */
    static void tooLarge(byte[] value) throws UndecodableValueException {
        if (value.length > JsonLimits.MAX_FILTER_VALUE_BYTES) {
            throw new UndecodableValueException(
                    "a value of " + value.length + " bytes, more than " + JsonLimits.MAX_FILTER_VALUE_BYTES);
        }
    }

    /** Step 8: the value parsed, or undecodable (nested deeper than the protocol's limit, or any parser error). */
    static JsonNode parse(byte[] value) throws UndecodableValueException {
        try {
            return CompactJson.parseRecord(value);
        } catch (IOException | RuntimeException e) {
            String message = e.getMessage() == null
                    ? e.getClass().getSimpleName()
                    : e.getMessage().lines().findFirst().orElse("");
            throw new UndecodableValueException("value is not JSON: " + message);
        }
    }

    /** The node at a dotted path (digits index arrays), or null when it is not there. */
    static JsonNode lookup(JsonNode document, List<String> path) {
        JsonNode node = document;
        for (String step : path) {
            if (node.isObject()) {
                node = node.get(step);
            } else if (node.isArray() && isDigits(step)) {
                int index;
                try {
                    index = Integer.parseInt(step);
                } catch (NumberFormatException e) {
                    return null;
                }
                node = index < node.size() ? node.get(index) : null;
            } else {
                return null;
            }
            if (node == null) {
                return null;
            }
        }
        return node;
    }

    private static boolean isDigits(String s) {
        if (s.isEmpty()) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                return false;
            }
        }
        return true;
    }

    private static final byte[] BACKSLASH = {'\\'};

    /** The bytes a JSON string value must appear as, when that is certain (no character JSON would escape). */
    private static byte[] needle(JsonNode value) {
        if (!value.isTextual()) {
            return null;
        }
        String s = value.textValue();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\' || c < 0x20) {
                return null;
            }
        }
        return ("\"" + s + "\"").getBytes(StandardCharsets.UTF_8);
    }

    static int indexOf(byte[] haystack, byte[] needle, int from) {
        if (needle.length == 0) {
            return from <= haystack.length ? from : -1;
        }
        byte first = needle[0];
        int last = haystack.length - needle.length;
        outer:
        for (int i = from; i <= last; i++) {
            if (haystack[i] != first) {
                continue;
            }
            for (int j = 1; j < needle.length; j++) {
                if (haystack[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }

    static boolean startsWith(byte[] haystack, byte[] prefix, int at) {
        if (at < 0 || at + prefix.length > haystack.length) {
            return false;
        }
        for (int j = 0; j < prefix.length; j++) {
            if (haystack[at + j] != prefix[j]) {
                return false;
            }
        }
        return true;
    }

    private SingleStringField singleStringField() {
        if (!headers.isEmpty() || keys != null || conditions.size() != 1) {
            return null;
        }
        Compiled c = conditions.get(0);
        if (c.path().size() != 1
                || c.exists() != null
                || c.values().size() != 1
                || !c.values().get(0).isTextual()
                || c.needles() == null
                || c.needles().isEmpty()) {
            return null;
        }
        return new SingleStringField(
                c.path().get(0), c.values().get(0).textValue(), c.needles().get(0));
    }

    /**
     * The filter "top-level field {@code key} equals the string {@code wanted}" as a function of the value. Without
     * a backslash no character is escaped, so compact JSON that opens with the field as a string and names the key
     * nowhere after it is answered from the bytes; otherwise a value without the needle cannot match; the rest is
     * parsed.
     */
    private static final class SingleStringField {
        private final String key;
        private final String wanted;
        private final byte[] needle;
        private final byte[] keyToken;
        private final int start;
        private final byte[] opens;
        private final byte[] hitComma;
        private final byte[] hitBrace;

        SingleStringField(String key, String wanted, byte[] needle) {
            this.key = key;
            this.wanted = wanted;
            this.needle = needle;
            this.keyToken = CompactJson.string(key).getBytes(StandardCharsets.UTF_8);
            byte[] head = concat(new byte[] {'{'}, keyToken, new byte[] {':'});
            this.start = head.length;
            this.opens = concat(head, new byte[] {'"'});
            this.hitComma = concat(head, needle, new byte[] {','});
            this.hitBrace = concat(head, needle, new byte[] {'}'});
        }

        boolean matches(byte[] value) throws UndecodableValueException {
            if (value == null) {
                return false;
            }
            tooLarge(value);
            if (indexOf(value, BACKSLASH, 0) < 0) {
                if (startsWith(value, opens, 0) && indexOf(value, keyToken, start) < 0) {
                    if (startsWith(value, hitComma, 0) || startsWith(value, hitBrace, 0)) {
                        return true;
                    }
                    if (!startsWith(value, needle, start)) {
                        return false;
                    }
                } else if (indexOf(value, needle, 0) < 0) {
                    return false;
                }
            }
            JsonNode document = parse(value);
            if (!document.isObject()) {
                return false;
            }
            JsonNode found = document.get(key);
            return found != null && found.isTextual() && found.textValue().equals(wanted);
        }
    }

    private static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        byte[] out = new byte[n];
        int at = 0;
        for (byte[] p : parts) {
            System.arraycopy(p, 0, out, at, p.length);
            at += p.length;
        }
        return out;
    }

    /** Byte arrays as set members. */
    private record Bytes(byte[] data) {
        static Bytes of(String s) {
            return new Bytes(s.getBytes(StandardCharsets.UTF_8));
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Bytes b && java.util.Arrays.equals(data, b.data);
        }

        @Override
        public int hashCode() {
            return java.util.Arrays.hashCode(data);
        }
    }

    /** JSON equality: same type, numbers by value ({@code 1 == 1.0}), {@code true != 1}; inside arrays and objects too. */
    static final class JsonEquality {
        private JsonEquality() {}

        static boolean equal(JsonNode a, JsonNode b) {
            if (a.isBoolean() || b.isBoolean()) {
                return a.isBoolean() && b.isBoolean() && a.booleanValue() == b.booleanValue();
            }
            if (a.isNumber() && b.isNumber()) {
                return numbersEqual(a, b);
            }
            if (a.isArray() && b.isArray()) {
                if (a.size() != b.size()) {
                    return false;
                }
                for (int i = 0; i < a.size(); i++) {
                    if (!equal(a.get(i), b.get(i))) {
                        return false;
                    }
                }
                return true;
            }
            if (a.isObject() && b.isObject()) {
                if (a.size() != b.size()) {
                    return false;
                }
                for (Iterator<Map.Entry<String, JsonNode>> it = a.fields(); it.hasNext(); ) {
                    Map.Entry<String, JsonNode> e = it.next();
                    JsonNode other = b.get(e.getKey());
                    if (other == null || !equal(e.getValue(), other)) {
                        return false;
                    }
                }
                return true;
            }
            if (a.isTextual() && b.isTextual()) {
                return a.textValue().equals(b.textValue());
            }
            return a.isNull() && b.isNull();
        }

        private static boolean numbersEqual(JsonNode a, JsonNode b) {
            if (a.isIntegralNumber() && b.isIntegralNumber()) {
                return a.bigIntegerValue().equals(b.bigIntegerValue());
            }
            double da = a.isIntegralNumber() ? 0 : a.doubleValue();
            double db = b.isIntegralNumber() ? 0 : b.doubleValue();
            if (Double.isNaN(da) || Double.isNaN(db)) {
                return false;
            }
            if (Double.isInfinite(da) || Double.isInfinite(db)) {
                return !a.isIntegralNumber() && !b.isIntegralNumber() && da == db;
            }
            return numeric(a).compareTo(numeric(b)) == 0;
        }

        private static BigDecimal numeric(JsonNode n) {
            return n.isIntegralNumber() ? new BigDecimal(n.bigIntegerValue()) : new BigDecimal(n.doubleValue());
        }
    }
}
