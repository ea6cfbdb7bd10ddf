package io.reprise.kafka.protocol;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * A replay's filter as published in its {@code replay} record (HANDOVER.md section 4):
 * {@code {"headers": {"name": ["value", ...]}, "keys": [...], "json": [{"path": "a.b.0", "equals": v} | {"path":
 * ..., "in": [...]} | {"path": ..., "exists": bool}]}}. {@code keysFile} is the replay side's; the handover
 * topic carries the keys inlined, and a guard cannot read a file mounted into the replay's pods.
 */
public record FilterSpec(
        Map<String, List<String>> headers, List<String> keys, String keysFile, List<JsonCondition> json) {

    /** One JSON condition: the field at {@code path} equals one of {@code values}, or exists (or not). */
    public record JsonCondition(List<String> path, List<JsonNode> values, Boolean exists) {
        public JsonCondition {
            path = List.copyOf(path);
            values = List.copyOf(values);
        }
    }

    public FilterSpec {
        headers = headers == null ? Map.of() : headers;
        json = json == null ? List.of() : List.copyOf(json);
    }

    public static final FilterSpec EMPTY = new FilterSpec(Map.of(), null, null, List.of());

    private static final Set<String> KNOWN = Set.of("headers", "keys", "keysFile", "json");

    public boolean isEmpty() {
        return headers.isEmpty() && keys == null && keysFile == null && json.isEmpty();
    }

    public static FilterSpec parse(String text) throws FilterSpecException {
        if (text == null || text.isEmpty()) {
            return EMPTY;
        }
        try {
            return parse(CompactJson.parse(text));
        } catch (IOException e) {
            throw new FilterSpecException(
                    "filter: not valid JSON ("
                            + e.getMessage().lines().findFirst().orElse("") + ")",
                    "filter",
                    "not-json");
        }
    }

    /** The filter of a {@code replay} record; every error names the field. */
    public static FilterSpec parse(JsonNode obj) throws FilterSpecException {
        String what = "filter";
        if (obj == null || obj.isNull()) {
            return EMPTY;
        }
        if (obj.isTextual()) {
            return obj.textValue().isEmpty() ? EMPTY : parse(obj.textValue());
        }
        if (!obj.isObject()) {
            throw new FilterSpecException(
                    what + ": expected a JSON object with headers, keys, keysFile or json", what, "not-an-object");
        }
        Set<String> unknown = new TreeSet<>();
        obj.fieldNames().forEachRemaining(name -> {
            if (!KNOWN.contains(name)) {
                unknown.add(name);
            }
        });
        if (!unknown.isEmpty()) {
            throw new FilterSpecException(
                    what + ": unknown field(s) " + pyList(unknown) + "; known: headers, keys, keysFile, json",
                    what + "." + unknown.iterator().next(),
                    "unknown-field");
        }
        Map<String, List<String>> headers = new LinkedHashMap<>();
        JsonNode rawHeaders = obj.get("headers");
        if (HandoverWire.truthy(rawHeaders)) {
            if (!rawHeaders.isObject()) {
                throw new FilterSpecException(
                        what + ".headers: expected {\"name\": [\"value\", ...]}", what + ".headers", "bad-headers");
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = rawHeaders.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> entry = it.next();
                JsonNode values = entry.getValue();
                List<String> list = new ArrayList<>();
                if (values.isTextual()) {
                    list.add(values.textValue());
                } else if (values.isArray() && values.size() > 0) {
                    for (JsonNode v : values) {
                        if (!v.isTextual()) {
                            list = null;
                            break;
                        }
                        list.add(v.textValue());
                    }
                } else {
                    list = null;
                }
                if (list == null) {
                    throw new FilterSpecException(
                            what + ".headers." + entry.getKey() + ": expected a string or a non-empty list of strings",
                            what + ".headers." + entry.getKey(),
                            "bad-header-values");
                }
                headers.put(entry.getKey(), List.copyOf(list));
            }
        }
        List<String> keys = null;
        JsonNode rawKeys = obj.get("keys");
        if (rawKeys != null && !rawKeys.isNull()) {
            if (!rawKeys.isArray()) {
                throw new FilterSpecException(what + ".keys: expected a list of strings", what + ".keys", "bad-keys");
            }
            keys = new ArrayList<>();
            for (JsonNode k : rawKeys) {
                if (!k.isTextual()) {
                    throw new FilterSpecException(
                            what + ".keys: expected a list of strings", what + ".keys", "bad-keys");
                }
                keys.add(k.textValue());
            }
        }
        String keysFile = null;
        JsonNode rawFile = obj.get("keysFile");
        if (rawFile != null && !rawFile.isNull()) {
            if (!rawFile.isTextual()) {
                throw new FilterSpecException(what + ".keysFile: expected a path", what + ".keysFile", "bad-keys-file");
            }
            keysFile = rawFile.textValue();
        }
        List<JsonCondition> conditions = new ArrayList<>();
        JsonNode rawJson = obj.get("json");
        if (HandoverWire.truthy(rawJson)) {
            if (rawJson.isObject()) {
                ArrayNode one = CompactJson.NODES.arrayNode();
                one.add(rawJson);
                rawJson = one;
            }
            if (!rawJson.isArray()) {
                throw new FilterSpecException(
                        what + ".json: expected a list of {path, equals|in|exists}", what + ".json", "bad-json");
            }
            int index = 0;
            for (JsonNode cond : rawJson) {
                String where = what + ".json[" + index++ + "]";
                if (!cond.isObject()
                        || !cond.path("path").isTextual()
                        || cond.get("path").textValue().isEmpty()) {
                    throw new FilterSpecException(
                            where + ": expected {\"path\": \"a.b\", \"equals\": value} (or in / exists)",
                            where,
                            "bad-condition");
                }
                List<String> ops = new ArrayList<>();
                for (String op : List.of("equals", "in", "exists")) {
                    if (cond.has(op)) {
                        ops.add(op);
                    }
                }
                if (ops.size() != 1) {
                    throw new FilterSpecException(
                            where + ": give exactly one of equals, in, exists", where, "bad-operator");
                }
                List<String> path = List.of(cond.get("path").textValue().split("\\.", -1));
                switch (ops.get(0)) {
                    case "equals" -> conditions.add(new JsonCondition(path, List.of(cond.get("equals")), null));
                    case "in" -> {
                        JsonNode in = cond.get("in");
                        if (!in.isArray() || in.isEmpty()) {
                            throw new FilterSpecException(
                                    where + ".in: expected a non-empty list", where + ".in", "bad-in");
                        }
                        List<JsonNode> values = new ArrayList<>();
                        in.forEach(values::add);
                        conditions.add(new JsonCondition(path, values, null));
                    }
                    default -> {
                        if (!cond.get("exists").isBoolean()) {
                            // "false" (a string) must not read as true: a guard would skip what the replay ignores.
                            throw new FilterSpecException(
                                    where + ".exists: expected true or false", where + ".exists", "bad-exists");
                        }
                        conditions.add(new JsonCondition(
                                path, List.of(), cond.get("exists").booleanValue()));
                    }
                }
            }
        }
        return new FilterSpec(headers, keys == null ? null : List.copyOf(keys), keysFile, conditions);
    }

    /** The JSON form, as the handover topic carries it. */
    public ObjectNode toJson() {
        ObjectNode body = CompactJson.NODES.objectNode();
        if (!headers.isEmpty()) {
            ObjectNode h = body.putObject("headers");
            headers.forEach((name, values) -> values.forEach(h.withArray(name)::add));
        }
        if (keys != null) {
            ArrayNode k = body.putArray("keys");
            keys.forEach(k::add);
        }
        if (keysFile != null) {
            body.put("keysFile", keysFile);
        }
        if (!json.isEmpty()) {
            ArrayNode conds = body.putArray("json");
            for (JsonCondition c : json) {
                ObjectNode o = conds.addObject();
                o.put("path", String.join(".", c.path()));
                if (c.exists() != null) {
                    o.put("exists", c.exists());
                } else if (c.values().size() == 1) {
                    o.set("equals", c.values().get(0));
                } else {
                    c.values().forEach(o.putArray("in")::add);
                }
            }
        }
        return body;
    }

    private static String pyList(Set<String> names) {
        StringBuilder out = new StringBuilder("[");
        for (String n : names) {
            if (out.length() > 1) {
                out.append(", ");
            }
            out.append('\'').append(n).append('\'');
        }
        return out.append(']').toString();
    }
}
