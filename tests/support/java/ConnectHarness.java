/*
 * Differential-test harness: runs Apache Kafka Connect's own JsonConverter, transformations and predicates
 * on JSON-lines requests, so tests can compare eosconnect with the real classes on the same inputs.
 *
 * Compiled at test time against connect-api, connect-json and connect-transforms from Maven Central
 * (tests/support/connect_harness.py does that and drives it). One JVM serves many requests: one JSON object
 * per line on stdin, one JSON object per line on stdout, in order.
 *
 * Request (every member optional except "topic"):
 *   {"converter": {JsonConverter settings, e.g. "schemas.enable": "true"},   -- default schemas.enable=false
 *    "topic": "t", "partition": 0, "timestamp": 1700000000000,
 *    "kafkaOffset": 42,              -- present: a SinkRecord with this offset; absent: a SourceRecord
 *    "key": <JSON>, "value": <JSON>, -- what JsonConverter reads: an envelope {"schema","payload"} when
 *                                       schemas.enable=true, plain JSON otherwise; null is a null key/value
 *    "headers": [["name", "text or null"], ...],  -- read as SimpleHeaderConverter reads header bytes
 *    "predicates": {"alias": {"class": "...", "config": {...}}},
 *    "transforms": [{"class": "...", "config": {...}, "predicate": "alias", "negate": true}, ...]}
 * Config values are passed to configure() as strings (JSON null stays null), as from a properties file.
 *
 * Response, one of:
 *   {"topic": ..., "partition": ..., "timestamp": ..., "key": <JSON>, "value": <JSON>,
 *    "headers": [["name", "text or null"], ...]}   -- key/value written back by JsonConverter (same settings),
 *                                                     headers as SimpleHeaderConverter writes them
 *   {"dropped": true}                               -- a transformation returned null
 *   {"error": {"class": "org.apache...DataException", "message": "...", "stage": "configure" | "apply" | "convert"}}
 * A request {"describe": "<transformation or predicate class>"} answers instead with its ConfigDef:
 *   {"config": [{"name", "type", "default" (null if none; "<required>" if it has no default), "importance"}]}
 * A response line never spans lines; the harness exits at end of input.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.Predicate;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class ConnectHarness {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Thrown to say which phase failed; its cause is what Kafka's class threw. */
    private static final class StageFailure extends Exception {
        final String stage;

        StageFailure(String stage, Throwable cause) {
            super(cause);
            this.stage = stage;
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode response;
            try {
                response = handle(JSON.readTree(line));
            } catch (StageFailure failure) {
                response = error(failure.getCause(), failure.stage);
            } catch (Throwable t) {
                response = error(t, "request");
            }
            out.println(JSON.writeValueAsString(response));
            out.flush();
        }
    }

    private static ObjectNode error(Throwable t, String stage) {
        ObjectNode node = JSON.createObjectNode();
        ObjectNode err = node.putObject("error");
        err.put("class", t.getClass().getName());
        err.put("message", t.getMessage());
        err.put("stage", stage);
        return node;
    }

    private static Map<String, String> stringMap(JsonNode node) {
        Map<String, String> map = new LinkedHashMap<>();
        if (node == null || node.isNull()) {
            return map;
        }
        Iterator<Map.Entry<String, JsonNode>> fields = node.fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> e = fields.next();
            JsonNode v = e.getValue();
            map.put(e.getKey(), v.isNull() ? null : v.isTextual() ? v.asText() : v.toString());
        }
        return map;
    }

    private static byte[] bytesOf(JsonNode node) throws Exception {
        return node == null || node.isNull() ? null : JSON.writeValueAsBytes(node);
    }

    private static JsonNode parse(byte[] bytes) throws Exception {
        return bytes == null ? JSON.nullNode() : JSON.readTree(bytes);
    }

    @SuppressWarnings("unchecked")
    private static <T> T instantiate(String className) throws Exception {
        return (T) Class.forName(className).getDeclaredConstructor().newInstance();
    }

    @SuppressWarnings("rawtypes")
    private static JsonNode describe(String className) throws Exception {
        Object plugin = instantiate(className);
        ConfigDef def = plugin instanceof Transformation
                ? ((Transformation) plugin).config() : ((Predicate) plugin).config();
        ObjectNode result = JSON.createObjectNode();
        ArrayNode keys = result.putArray("config");
        for (ConfigDef.ConfigKey key : def.configKeys().values()) {
            ObjectNode item = keys.addObject();
            item.put("name", key.name);
            item.put("type", key.type.name());
            if (key.defaultValue == ConfigDef.NO_DEFAULT_VALUE) {
                item.put("default", "<required>");
            } else if (key.defaultValue == null) {
                item.putNull("default");
            } else if (key.defaultValue instanceof List) {
                item.put("default", String.join(",", ((List<?>) key.defaultValue).stream()
                        .map(String::valueOf).toArray(String[]::new)));
            } else {
                item.put("default", String.valueOf(key.defaultValue));
            }
            item.put("importance", key.importance.name());
        }
        return result;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static JsonNode handle(JsonNode req) throws Exception {
        if (req.hasNonNull("describe")) {
            return describe(req.get("describe").asText());
        }
        Map<String, String> converterConfig = new HashMap<>();
        converterConfig.put("schemas.enable", "false");
        converterConfig.putAll(stringMap(req.get("converter")));
        JsonConverter keyConverter = new JsonConverter();
        keyConverter.configure(converterConfig, true);
        JsonConverter valueConverter = new JsonConverter();
        valueConverter.configure(converterConfig, false);
        SimpleHeaderConverter headerConverter = new SimpleHeaderConverter();

        String topic = req.get("topic").asText();
        Integer partition = req.hasNonNull("partition") ? req.get("partition").asInt() : null;
        Long timestamp = req.hasNonNull("timestamp") ? req.get("timestamp").asLong() : null;
        SchemaAndValue key = keyConverter.toConnectData(topic, bytesOf(req.get("key")));
        SchemaAndValue value = valueConverter.toConnectData(topic, bytesOf(req.get("value")));
        ConnectHeaders headers = new ConnectHeaders();
        if (req.hasNonNull("headers")) {
            for (JsonNode pair : req.get("headers")) {
                String name = pair.get(0).asText();
                byte[] raw = pair.get(1).isNull() ? null : pair.get(1).asText().getBytes(StandardCharsets.UTF_8);
                headers.add(name, headerConverter.toConnectHeader(topic, name, raw));
            }
        }
        ConnectRecord record;
        if (req.hasNonNull("kafkaOffset")) {
            record = new SinkRecord(topic, partition == null ? 0 : partition, key.schema(), key.value(),
                    value.schema(), value.value(), req.get("kafkaOffset").asLong(), timestamp,
                    timestamp == null ? TimestampType.NO_TIMESTAMP_TYPE : TimestampType.CREATE_TIME, headers);
        } else {
            record = new SourceRecord(null, null, topic, partition, key.schema(), key.value(),
                    value.schema(), value.value(), timestamp, headers);
        }

        Map<String, Predicate> predicates = new HashMap<>();
        List<Transformation> transforms = new ArrayList<>();
        try {
            try {
                if (req.hasNonNull("predicates")) {
                    Iterator<Map.Entry<String, JsonNode>> it = req.get("predicates").fields();
                    while (it.hasNext()) {
                        Map.Entry<String, JsonNode> e = it.next();
                        Predicate p = instantiate(e.getValue().get("class").asText());
                        predicates.put(e.getKey(), p);
                        p.configure(stringMap(e.getValue().get("config")));
                    }
                }
                if (req.hasNonNull("transforms")) {
                    for (JsonNode t : req.get("transforms")) {
                        Transformation transform = instantiate(t.get("class").asText());
                        transforms.add(transform);
                        transform.configure(stringMap(t.get("config")));
                    }
                }
            } catch (Throwable t) {
                throw new StageFailure("configure", t);
            }
            try {
                int index = 0;
                for (JsonNode t : req.path("transforms")) {
                    Transformation transform = transforms.get(index++);
                    if (t.hasNonNull("predicate")) {
                        Predicate p = predicates.get(t.get("predicate").asText());
                        boolean negate = t.path("negate").asBoolean(false);
                        if (p.test(record) == negate) {
                            continue;
                        }
                    }
                    record = transform.apply(record);
                    if (record == null) {
                        ObjectNode dropped = JSON.createObjectNode();
                        dropped.put("dropped", true);
                        return dropped;
                    }
                }
            } catch (Throwable t) {
                throw new StageFailure("apply", t);
            }
        } finally {
            for (Transformation t : transforms) {
                t.close();
            }
            for (Predicate p : predicates.values()) {
                p.close();
            }
        }

        ObjectNode result = JSON.createObjectNode();
        result.put("topic", record.topic());
        if (record.kafkaPartition() == null) {
            result.putNull("partition");
        } else {
            result.put("partition", record.kafkaPartition());
        }
        if (record.timestamp() == null) {
            result.putNull("timestamp");
        } else {
            result.put("timestamp", record.timestamp());
        }
        try {
            result.set("key", parse(keyConverter.fromConnectData(record.topic(), record.keySchema(), record.key())));
            result.set("value",
                    parse(valueConverter.fromConnectData(record.topic(), record.valueSchema(), record.value())));
            ArrayNode outHeaders = result.putArray("headers");
            for (Header h : record.headers()) {
                byte[] raw = headerConverter.fromConnectHeader(record.topic(), h.key(), h.schema(), h.value());
                ArrayNode pair = outHeaders.addArray();
                pair.add(h.key());
                if (raw == null) {
                    pair.addNull();
                } else {
                    pair.add(new String(raw, StandardCharsets.UTF_8));
                }
            }
        } catch (Throwable t) {
            throw new StageFailure("convert", t);
        }
        return result;
    }
}
