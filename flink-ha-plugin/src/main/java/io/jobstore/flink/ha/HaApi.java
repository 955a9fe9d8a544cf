package io.jobstore.flink.ha;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * jobstore's HA routes under {@code /v1/clusters/{cluster}/ha} (docs/api.md, "HA services"): the
 * cluster's leader lease, the leader information of each component, the state handles, the
 * checkpoint id counters and the cleanups. Every write names a lease epoch; jobstore answers a
 * stale one with 409 {@code fenced: ...}, which is a {@link NotLeaderException} here (and calls
 * the {@code onFenced} hook, so that the lease is checked at once).
 */
final class HaApi {

    /** The lease epoch of a write is not (any more) the cluster's live lease. */
    static final class NotLeaderException extends IOException {
        private static final long serialVersionUID = 1L;

        NotLeaderException(String message) {
            super(message);
        }
    }

    /** The kinds of state handles. */
    static final String EXECUTION_PLAN = "execution-plan";
    static final String APPLICATION = "application";
    static final String CHECKPOINT = "checkpoint";

    /** One component's leader information as stored. */
    static final class LeaderRecord {
        final String component;
        final long epoch;
        final String address;
        final String sessionId;

        LeaderRecord(String component, long epoch, String address, String sessionId) {
            this.component = component;
            this.epoch = epoch;
            this.address = address;
            this.sessionId = sessionId;
        }

        @Override
        public String toString() {
            return component + "@" + epoch + "=" + address + "/" + sessionId;
        }
    }

    /** The leader information of every component of the cluster, with its ETag. */
    static final class Listing {
        final String etag;
        /** By component. */
        final Map<String, LeaderRecord> records;

        Listing(String etag, Map<String, LeaderRecord> records) {
            this.etag = etag;
            this.records = Collections.unmodifiableMap(records);
        }

        /** The highest epoch among the records (0 for none): the newest leader's. */
        long newestEpoch() {
            long max = 0;
            for (LeaderRecord r : records.values()) {
                max = Math.max(max, r.epoch);
            }
            return max;
        }
    }

    /** A state handle entry as stored. */
    static final class Handle {
        final String name;
        final long version;
        final byte[] bytes;
        final boolean markedForDeletion;

        Handle(String name, long version, byte[] bytes, boolean markedForDeletion) {
            this.name = name;
            this.version = version;
            this.bytes = bytes;
            this.markedForDeletion = markedForDeletion;
        }
    }

    /**
     * The answer to a conditional write of a state handle: its status (200/201 done, 404 absent,
     * 409 present or another version), and whether an earlier attempt of the call may have been
     * applied (its answer was lost).
     */
    static final class Write {
        final int status;
        final boolean retried;

        Write(int status, boolean retried) {
            this.status = status;
            this.retried = retried;
        }
    }

    private final JobstoreClient client;
    private final String base;
    private final Runnable onFenced;

    HaApi(JobstoreClient client, Runnable onFenced) {
        this.client = client;
        this.base = "/v1/clusters/" + client.clusterId() + "/ha";
        this.onFenced = onFenced;
    }

    JobstoreClient client() {
        return client;
    }

    String clusterId() {
        return client.clusterId();
    }

    // --- the lease (one attempt each: the lease loop keeps its own time) ---------------------

    /** The epoch acquired, or -1 when another holder has a live lease. */
    long acquire(String holder, Duration lease, Duration timeout) throws IOException {
        ObjectNode body = object().put("holder", holder).put("duration-ms", lease.toMillis());
        JobstoreClient.Outcome out = once("POST", base + "/lease/acquire", body, timeout);
        if (out.status == 409) {
            return -1;
        }
        return expect(200, "POST", base + "/lease/acquire", out).path("epoch").asLong();
    }

    /** True when renewed; false when the holder does not hold that epoch live (fenced). */
    boolean renew(String holder, long epoch, Duration lease, Duration timeout) throws IOException {
        ObjectNode body =
                object().put("holder", holder).put("epoch", epoch).put("duration-ms", lease.toMillis());
        JobstoreClient.Outcome out = once("POST", base + "/lease/renew", body, timeout);
        if (out.status == 409) {
            return false;
        }
        expect(200, "POST", base + "/lease/renew", out);
        return true;
    }

    /** Whether the live lease of that epoch was released. */
    boolean release(String holder, long epoch, Duration timeout) throws IOException {
        ObjectNode body = object().put("holder", holder).put("epoch", epoch);
        JobstoreClient.Outcome out = once("POST", base + "/lease/release", body, timeout);
        return expect(200, "POST", base + "/lease/release", out).path("released").asBoolean();
    }

    // --- leader information -------------------------------------------------------------------

    void publishLeaderInfo(long epoch, String component, String address, String sessionId) throws IOException {
        String path = base + "/leader-info/" + segment(component);
        ObjectNode body = object().put("epoch", epoch).put("address", address).put("session-id", sessionId);
        expect(200, "PUT", path, fenced(client.call("PUT", path, json(body))));
    }

    void deleteLeaderInfo(long epoch, String component) throws IOException {
        String path = base + "/leader-info/" + segment(component);
        expect(204, "DELETE", path, fenced(client.call("DELETE", path, json(object().put("epoch", epoch)))));
    }

    /**
     * The leader information of every component: at once when {@code etag} is null or differs
     * from the current listing's, else after at most {@code wait} when it changes; null when it
     * did not change within {@code wait} (304). One attempt.
     */
    Listing pollLeaderInfo(String etag, Duration wait) throws IOException {
        String path = base + "/leader-info?wait-ms=" + wait.toMillis();
        JobstoreClient.Request req =
                new JobstoreClient.Request("GET", path, null).attempts(1).timeout(wait.plus(client.timeout()));
        if (etag != null) {
            req.header("If-None-Match", etag);
        }
        JobstoreClient.Outcome out = client.call(req);
        if (out.status == 304) {
            return null;
        }
        JsonNode page = expect(200, "GET", path, out);
        Map<String, LeaderRecord> records = new LinkedHashMap<>();
        for (JsonNode r : page.path("leader-info")) {
            LeaderRecord record =
                    new LeaderRecord(
                            r.path("component").asText(),
                            r.path("epoch").asLong(),
                            r.path("address").asText(),
                            r.path("session-id").asText());
            records.put(record.component, record);
        }
        return new Listing(out.headers.firstValue("ETag").orElse(null), records);
    }

    // --- state handles ----------------------------------------------------------------------

    /** The entry, or null when there is none. */
    Handle getHandle(String kind, String job, String name) throws IOException {
        String path = handlePath(kind, name) + jobQuery(job);
        JobstoreClient.Outcome out = client.call("GET", path, null);
        if (out.status == 404) {
            return null;
        }
        return handle(expect(200, "GET", path, out));
    }

    /** Every entry of a kind (of one job for checkpoints), marked ones included, by name. */
    List<Handle> listHandles(String kind, String job) throws IOException {
        String path = base + "/state-handles/" + kind + jobQuery(job);
        List<Handle> all = new ArrayList<>();
        for (JsonNode h : expect(200, "GET", path, client.call("GET", path, null)).path("state-handles")) {
            all.add(handle(h));
        }
        return all;
    }

    /** Add if absent: 201 done, 409 present. */
    Write addHandle(long epoch, String kind, String job, String name, byte[] handle) throws IOException {
        ObjectNode body = withJob(object().put("epoch", epoch), job).put("handle", hex(handle));
        return write("POST", handlePath(kind, name), body, 201, 409);
    }

    /** Compare-and-set on the version: 200 done, 409 another version, 404 absent or marked. */
    Write replaceHandle(long epoch, String kind, String job, String name, long expectedVersion, byte[] handle)
            throws IOException {
        ObjectNode body =
                withJob(object().put("epoch", epoch), job)
                        .put("expected-version", expectedVersion)
                        .put("handle", hex(handle));
        return write("PUT", handlePath(kind, name), body, 200, 409, 404);
    }

    /** The first phase of a removal: 200 marked, 404 absent. */
    Write markForDeletion(long epoch, String kind, String job, String name) throws IOException {
        ObjectNode body = withJob(object().put("epoch", epoch), job);
        return write("POST", handlePath(kind, name) + "/mark-for-deletion", body, 200, 404);
    }

    /** Removes the entry (idempotent: gone either way). */
    void removeHandle(long epoch, String kind, String job, String name) throws IOException {
        write("DELETE", handlePath(kind, name), withJob(object().put("epoch", epoch), job), 200);
    }

    // --- checkpoint id counters -----------------------------------------------------------------

    /** The id handed out (1 first), atomically. */
    long getAndIncrement(long epoch, String job) throws IOException {
        String path = base + "/counters/" + job + "/get-and-increment";
        return expect(200, "POST", path, fenced(client.call("POST", path, json(object().put("epoch", epoch)))))
                .path("value")
                .asLong();
    }

    /** The next id, or null when the job has no counter. */
    Long counter(String job) throws IOException {
        String path = base + "/counters/" + job;
        JobstoreClient.Outcome out = client.call("GET", path, null);
        return out.status == 404 ? null : expect(200, "GET", path, out).path("value").asLong();
    }

    void setCounter(long epoch, String job, long value) throws IOException {
        String path = base + "/counters/" + job;
        expect(200, "PUT", path, fenced(client.call("PUT", path, json(object().put("epoch", epoch).put("value", value)))));
    }

    void deleteCounter(long epoch, String job) throws IOException {
        delete(base + "/counters/" + job, epoch);
    }

    // --- cleanups -----------------------------------------------------------------------------------

    /** A job's HA data: leader information, checkpoints, execution plan and counter. */
    void cleanupJob(long epoch, String job) throws IOException {
        delete(base + "/jobs/" + job, epoch);
    }

    /** Every HA entry of the cluster (the lease row stays). */
    void cleanupCluster(long epoch) throws IOException {
        delete(base, epoch);
    }

    // -----------------------------------------------------------------------------------------------

    private void delete(String path, long epoch) throws IOException {
        expect(204, "DELETE", path, fenced(client.call("DELETE", path, json(object().put("epoch", epoch)))));
    }

    private Write write(String method, String path, ObjectNode body, int... expected) throws IOException {
        JobstoreClient.Outcome out = fenced(client.call(method, path, json(body)));
        for (int status : expected) {
            if (out.status == status) {
                return new Write(out.status, out.earlierAttemptMayHaveLanded);
            }
        }
        throw client.unexpected(method, path, out);
    }

    private JobstoreClient.Outcome once(String method, String path, ObjectNode body, Duration timeout)
            throws IOException {
        return client.call(new JobstoreClient.Request(method, path, json(body)).attempts(1).timeout(timeout));
    }

    /** A 409 {@code fenced: ...} answer as a {@link NotLeaderException}. */
    private JobstoreClient.Outcome fenced(JobstoreClient.Outcome out) throws NotLeaderException {
        if (out.status == 409) {
            String message = JobstoreClient.errorMessage(out.body, "");
            if (message.startsWith("fenced:")) {
                onFenced.run();
                throw new NotLeaderException("jobstore (cluster " + client.clusterId() + "): " + message);
            }
        }
        return out;
    }

    private JsonNode expect(int status, String method, String path, JobstoreClient.Outcome out) throws IOException {
        if (out.status != status) {
            throw client.unexpected(method, path, out);
        }
        return status == 204 ? null : parse(method, path, out);
    }

    private static JsonNode parse(String method, String path, JobstoreClient.Outcome out) throws IOException {
        return JobstoreClient.parseObject(method, path, out.body);
    }

    private static Handle handle(JsonNode h) throws IOException {
        return new Handle(
                h.path("name").asText(),
                h.path("version").asLong(),
                unhex(h.path("handle").asText()),
                h.path("marked-for-deletion").asBoolean(false));
    }

    private String handlePath(String kind, String name) {
        return base + "/state-handles/" + kind + "/" + segment(name);
    }

    private static String jobQuery(String job) {
        return job == null ? "" : "?job=" + job;
    }

    private static ObjectNode withJob(ObjectNode body, String job) {
        return job == null ? body : body.put("job", job);
    }

    private static ObjectNode object() {
        return FlinkJson.MAPPER.createObjectNode();
    }

    private static byte[] json(ObjectNode body) throws IOException {
        return FlinkJson.MAPPER.writeValueAsBytes(body);
    }

    /** A path segment: names here are ids and Flink's component names; anything else is escaped. */
    static String segment(String s) {
        StringBuilder b = new StringBuilder();
        for (byte c : s.getBytes(StandardCharsets.UTF_8)) {
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_') {
                b.append((char) c);
            } else {
                b.append('%').append(String.format("%02X", c & 0xff));
            }
        }
        return b.toString();
    }

    static String hex(byte[] bytes) {
        StringBuilder b = new StringBuilder(bytes.length * 2);
        for (byte x : bytes) {
            b.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return b.toString();
    }

    static byte[] unhex(String s) throws IOException {
        if (s.length() % 2 != 0) {
            throw new IOException("state handle is not hex: odd length " + s.length());
        }
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            int hi = Character.digit(s.charAt(2 * i), 16);
            int lo = Character.digit(s.charAt(2 * i + 1), 16);
            if (hi < 0 || lo < 0) {
                throw new IOException("state handle is not hex at " + 2 * i);
            }
            out[i] = (byte) (hi << 4 | lo);
        }
        return out;
    }
}
