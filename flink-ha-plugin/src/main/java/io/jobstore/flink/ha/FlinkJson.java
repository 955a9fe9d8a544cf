package io.jobstore.flink.ha;

import org.apache.flink.runtime.highavailability.ApplicationResult;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.rest.messages.json.ApplicationResultDeserializer;
import org.apache.flink.runtime.rest.messages.json.ApplicationResultSerializer;
import org.apache.flink.runtime.rest.messages.json.JobResultDeserializer;
import org.apache.flink.runtime.rest.messages.json.JobResultSerializer;
import org.apache.flink.util.jackson.JacksonMapperFactory;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.module.SimpleModule;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Comparator;

/**
 * JSON of Flink's own result stores: the same serializers that {@code FileSystemJobResultStore}
 * and {@code FileSystemApplicationResultStore} use, so that an entry in jobstore has exactly the
 * content of a Flink JRS file: {@code {"result": {...}, "version": 1}}.
 */
final class FlinkJson {

    static final int VERSION = 1;

    static final ObjectMapper MAPPER = createMapper();

    private FlinkJson() {}

    private static ObjectMapper createMapper() {
        SimpleModule module = new SimpleModule("jobstore-flink-results");
        module.addSerializer(JobResult.class, new JobResultSerializer());
        module.addDeserializer(JobResult.class, new JobResultDeserializer());
        module.addSerializer(ApplicationResult.class, new ApplicationResultSerializer());
        module.addDeserializer(ApplicationResult.class, new ApplicationResultDeserializer());
        ObjectMapper mapper = JacksonMapperFactory.createObjectMapper();
        mapper.registerModule(module);
        return mapper;
    }

    /** The request body of a create: {@code {"result": <JobResult JSON>, "version": 1}}. */
    static byte[] envelope(JobResult result) throws IOException {
        return wrap(MAPPER.writeValueAsString(result));
    }

    /** The request body of a create: {@code {"result": <ApplicationResult JSON>, "version": 1}}. */
    static byte[] envelope(ApplicationResult result) throws IOException {
        return wrap(MAPPER.writeValueAsString(result));
    }

    private static byte[] wrap(String resultJson) {
        return ("{\"result\":" + resultJson + ",\"version\":" + VERSION + "}")
                .getBytes(StandardCharsets.UTF_8);
    }

    static JobResult jobResult(JsonNode result) throws IOException {
        return MAPPER.treeToValue(result, JobResult.class);
    }

    static ApplicationResult applicationResult(JsonNode result) throws IOException {
        return MAPPER.treeToValue(result, ApplicationResult.class);
    }

    static JsonNode parse(byte[] json) throws IOException {
        return MAPPER.readTree(json);
    }

    /**
     * Equality of two JSON documents where numbers compare by value (1 equals 1.0, an int node
     * equals a long node), so a server that re-encodes numbers does not make equal results differ.
     */
    static boolean sameJson(JsonNode a, JsonNode b) {
        if (a == null || b == null) {
            return a == b;
        }
        return a.equals(NUMBERS_BY_VALUE, b);
    }

    private static final Comparator<JsonNode> NUMBERS_BY_VALUE =
            (x, y) -> {
                if (x.equals(y)) {
                    return 0;
                }
                if (x.isNumber() && y.isNumber()) {
                    return x.decimalValue().compareTo(y.decimalValue()) == 0 ? 0 : 1;
                }
                return 1;
            };
}
