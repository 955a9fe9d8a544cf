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
import java.util.Objects;

/**
 * jobstore's HA routes under {@code /v1/clusters/{cluster}/ha} (docs/api.md, "HA services"): the
 * cluster's leader lease, the leader information of each component, the state handles, the
 * checkpoint id counters and the cleanups. Every write names a {@link Lease} (its epoch and lease
 * id); jobstore answers one that is not the live lease with 409 {@code fenced: ...}, which is a
 * {@link NotLeaderException} here (and calls the {@code onFenced} hook, so that the lease is checked
 * at once).
 */
final class HaApi {

    /**
     * One acquisition of the cluster's leader lease: its epoch and its lease id (a random UUID
     * jobstore draws at every acquisition). Every fenced write names both: an epoch alone can be
     * handed out twice when a database failover loses the commit of an acquisition, a lease id
     * cannot. Immutable.
     */
    static final class Lease {
        final long epoch;
        /** The UUID the acquisition answered, hyphenated (36 characters). */
        final String leaseId;

        Lease(long epoch, String leaseId) {
            if (epoch < 1) {
                throw new IllegalArgumentException("epoch must be at least 1, got " + epoch);
            }
            this.epoch = epoch;
            this.leaseId = Objects.requireNonNull(leaseId, "leaseId");
        }

        @Override
        public boolean equals(Object o) {
            if (this == o) {
                return true;
            }
            if (!(o instanceof Lease)) {
                return false;
            }
            Lease other = (Lease) o;
            return epoch == other.epoch && leaseId.equals(other.leaseId);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(epoch) * 31 + leaseId.hashCode();
        }

        /** Short, for logs: the epoch and the first 8 characters of the lease id. */
        @Override
        public String toString() {
            return "epoch " + epoch + ", lease " + leaseId.substring(0, Math.min(8, leaseId.length()));
        }
    }

    /** The lease a write names is not (any more) the cluster's live lease. */
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

        /** An entry of {@code GET .../leader-info}'s {@code "leader-info"}. */
        LeaderRecord(JsonNode r) {
            this.component = r.path("component").asText();
            this.epoch = r.path("epoch").asLong();
            this.address = r.path("address").asText();
            this.sessionId = r.path("session-id").asText();
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

        /** A state handle as jobstore answers it: its {@code "handle"} in hex. */
        Handle(JsonNode h) throws IOException {
            this.name = h.path("name").asText();
            this.version = h.path("version").asLong();
            this.bytes = unhex(h.path("handle").asText());
            this.markedForDeletion = h.path("marked-for-deletion").asBoolean(false);
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

        Write(JobstoreClient.Outcome out) {
            this.status = out.status;
            this.retried = out.earlierAttemptMayHaveLanded;
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

    /** The header of an acquisition's 409: how long the other holder's live lease has left. */
    static final String LEASE_EXPIRES_IN = "Jobstore-Lease-Expires-In-Ms";

    /** An acquisition's answer: the lease, or how long another holder's live lease has left. */
    static final class Acquisition {
        /** The lease acquired; null when another holder has a live lease. */
        final Lease lease;
        /**
         * With no lease: the milliseconds the other holder's lease has left on jobstore's clock
         * (header {@link #LEASE_EXPIRES_IN}); -1 when jobstore did not say (an older jobstore).
         */
        final long heldForMs;

        Acquisition(Lease lease, long heldForMs) {
            this.lease = lease;
            this.heldForMs = heldForMs;
        }
    }

    /** The cluster's lease as {@code GET .../lease} answers it (never its lease id), with its ETag. */
    static final class LeaseState {
        final String etag;
        final String holder;
        final long epoch;
        final boolean live;
        /** How long it has left on jobstore's clock (0 once expired or released). */
        final long expiresInMs;

        /** The answer of {@code GET .../lease} and its ETag. */
        LeaseState(String etag, JsonNode answer) {
            this.etag = etag;
            this.holder = answer.path("holder").asText();
            this.epoch = answer.path("epoch").asLong();
            this.live = answer.path("live").asBoolean();
            this.expiresInMs = Math.max(0, answer.path("expires-in-ms").asLong());
        }

        @Override
        public String toString() {
            return (live ? "held by " : "expired, last held by ") + holder + " (epoch " + epoch + ", "
                    + expiresInMs + " ms left)";
        }
    }

    /**
     * The lease acquired (the live holder asking again renews it: the same epoch and lease id), or
     * null when another holder has a live lease.
     */
    Lease acquire(String holder, Duration lease, Duration timeout) throws IOException {
        return tryAcquire(holder, lease, timeout).lease;
    }

    /**
     * {@link #acquire}, telling with a refusal how long the other holder's lease has left (so that
     * a standby can try again right when it expires).
     */
    Acquisition tryAcquire(String holder, Duration lease, Duration timeout) throws IOException {
        ObjectNode body = object().put("holder", holder).put("duration-ms", lease.toMillis());
        String path = base + "/lease/acquire";
        JobstoreClient.Outcome out = once("POST", path, body, timeout);
        if (out.status == 409) {
            long left = -1;
            try {
                left = Long.parseLong(out.headers.firstValue(LEASE_EXPIRES_IN).orElse("-1").trim());
            } catch (NumberFormatException e) {
                // Not a number: as if jobstore had not said.
            }
            return new Acquisition(null, Math.max(-1, left));
        }
        JsonNode answer = expect(200, "POST", path, out);
        JsonNode epoch = answer.path("epoch");
        String leaseId = answer.path("lease-id").asText("");
        if (!epoch.isIntegralNumber() || epoch.asLong() < 1 || leaseId.length() != 36) {
            throw new IOException(
                    "jobstore (cluster " + client.clusterId() + ") answered POST " + path
                            + " without a valid epoch and lease-id (a jobstore older than the plugin?)");
        }
        return new Acquisition(new Lease(epoch.asLong(), leaseId), -1);
    }

    /**
     * The cluster's lease: at once when {@code etag} is null or differs from the current lease's,
     * else when its holder, epoch or liveness changes (an acquisition, a release, a cleanup, its
     * expiry) within {@code wait}; null when nothing changed within {@code wait} (304). One attempt
     * of at most {@code timeout}; an IOException for anything else (404: never leased, or a
     * jobstore without the route).
     */
    LeaseState pollLease(String etag, Duration wait, Duration timeout) throws IOException {
        String path = base + "/lease?wait-ms=" + wait.toMillis();
        JobstoreClient.Outcome out = poll(path, etag, timeout);
        return out == null ? null : new LeaseState(etag(out), expect(200, "GET", path, out));
    }

    /** True when renewed; false when the holder does not hold that lease live (fenced). */
    boolean renew(String holder, Lease held, Duration lease, Duration timeout) throws IOException {
        ObjectNode body = fence(object().put("holder", holder), held).put("duration-ms", lease.toMillis());
        JobstoreClient.Outcome out = once("POST", base + "/lease/renew", body, timeout);
        if (out.status == 409) {
            return false;
        }
        expect(200, "POST", base + "/lease/renew", out);
        return true;
    }

    /** Whether that lease was live and is released now. */
    boolean release(String holder, Lease held, Duration timeout) throws IOException {
        ObjectNode body = fence(object().put("holder", holder), held);
        JobstoreClient.Outcome out = once("POST", base + "/lease/release", body, timeout);
        return expect(200, "POST", base + "/lease/release", out).path("released").asBoolean();
    }

    // --- leader information -------------------------------------------------------------------

    void publishLeaderInfo(Lease lease, String component, String address, String sessionId) throws IOException {
        String path = base + "/leader-info/" + segment(component);
        ObjectNode body = fence(lease).put("address", address).put("session-id", sessionId);
        expect(200, "PUT", path, fenced(client.call("PUT", path, json(body))));
    }

    void deleteLeaderInfo(Lease lease, String component) throws IOException {
        String path = base + "/leader-info/" + segment(component);
        expect(204, "DELETE", path, fenced(client.call("DELETE", path, json(fence(lease)))));
    }

    /**
     * The leader information of every component: at once when {@code etag} is null or differs
     * from the current listing's, else after at most {@code wait} when it changes; null when it
     * did not change within {@code wait} (304). One attempt.
     */
    Listing pollLeaderInfo(String etag, Duration wait) throws IOException {
        String path = base + "/leader-info?wait-ms=" + wait.toMillis();
        JobstoreClient.Outcome out = poll(path, etag, wait.plus(client.timeout()));
        if (out == null) {
            return null;
        }
        JsonNode page = expect(200, "GET", path, out);
        Map<String, LeaderRecord> records = new LinkedHashMap<>();
        for (JsonNode r : page.path("leader-info")) {
            LeaderRecord record = new LeaderRecord(r);
            records.put(record.component, record);
        }
        return new Listing(etag(out), records);
    }

    // --- state handles ----------------------------------------------------------------------

    /** The entry, or null when there is none. */
    Handle getHandle(String kind, String job, String name) throws IOException {
        String path = handlePath(kind, name) + jobQuery(job);
        JobstoreClient.Outcome out = client.call("GET", path, null);
        if (out.status == 404) {
            return null;
        }
        return new Handle(expect(200, "GET", path, out));
    }

    /** Most handles a page of a listing asks for (jobstore's limit). */
    static final int LIST_PAGE = 10_000;
    /** Most pages one listing follows: far more than jobstore can hold for one kind and job. */
    static final int MAX_PAGES = 100_000;

    /**
     * Every entry of a kind (of one job for checkpoints), marked ones included, by name: the
     * listing's pages one after the other, until jobstore answers no {@code next}.
     */
    List<Handle> listHandles(String kind, String job) throws IOException {
        String first = base + "/state-handles/" + kind + "?limit=" + LIST_PAGE + (job == null ? "" : "&job=" + job);
        List<Handle> all = new ArrayList<>();
        String after = null;
        for (int page = 0; page < MAX_PAGES; page++) {
            String path = after == null ? first : first + "&after=" + segment(after);
            JsonNode answer = expect(200, "GET", path, client.call("GET", path, null));
            for (JsonNode h : answer.path("state-handles")) {
                all.add(new Handle(h));
            }
            JsonNode next = answer.path("next");
            if (!next.isTextual()) {
                return all;
            }
            if (next.asText().equals(after)) {
                throw new IOException(
                        "jobstore (cluster " + client.clusterId() + ") answered GET " + path
                                + " with the same next page again: " + next.asText());
            }
            after = next.asText();
        }
        throw new IOException(
                "jobstore (cluster " + client.clusterId() + "): the listing of " + kind
                        + " state handles has more than " + MAX_PAGES + " pages");
    }

    /** Add if absent: 201 done, 409 present. */
    Write addHandle(Lease lease, String kind, String job, String name, byte[] handle) throws IOException {
        ObjectNode body = withJob(fence(lease), job).put("handle", hex(handle));
        return write("POST", handlePath(kind, name), body, 201, 409);
    }

    /** Compare-and-set on the version: 200 done, 409 another version, 404 absent or marked. */
    Write replaceHandle(Lease lease, String kind, String job, String name, long expectedVersion, byte[] handle)
            throws IOException {
        ObjectNode body =
                withJob(fence(lease), job)
                        .put("expected-version", expectedVersion)
                        .put("handle", hex(handle));
        return write("PUT", handlePath(kind, name), body, 200, 409, 404);
    }

    /** The first phase of a removal: 200 marked, 404 absent. */
    Write markForDeletion(Lease lease, String kind, String job, String name) throws IOException {
        ObjectNode body = withJob(fence(lease), job);
        return write("POST", handlePath(kind, name) + "/mark-for-deletion", body, 200, 404);
    }

    /** Removes the entry (idempotent: gone either way). */
    void removeHandle(Lease lease, String kind, String job, String name) throws IOException {
        write("DELETE", handlePath(kind, name), withJob(fence(lease), job), 200);
    }

    // --- checkpoint id counters -----------------------------------------------------------------

    /** The id handed out (1 first), atomically. */
    long getAndIncrement(Lease lease, String job) throws IOException {
        String path = base + "/counters/" + job + "/get-and-increment";
        return expect(200, "POST", path, fenced(client.call("POST", path, json(fence(lease)))))
                .path("value")
                .asLong();
    }

    /** The next id, or null when the job has no counter. */
    Long counter(String job) throws IOException {
        String path = base + "/counters/" + job;
        JobstoreClient.Outcome out = client.call("GET", path, null);
        return out.status == 404 ? null : expect(200, "GET", path, out).path("value").asLong();
    }

    void setCounter(Lease lease, String job, long value) throws IOException {
        String path = base + "/counters/" + job;
        expect(200, "PUT", path, fenced(client.call("PUT", path, json(fence(lease).put("value", value)))));
    }

    void deleteCounter(Lease lease, String job) throws IOException {
        delete(base + "/counters/" + job, lease);
    }

    // --- cleanups -----------------------------------------------------------------------------------

    /** A job's HA data: leader information, checkpoints, execution plan and counter. */
    void cleanupJob(Lease lease, String job) throws IOException {
        delete(base + "/jobs/" + job, lease);
    }

    /** Every HA entry of the cluster (the lease row stays). */
    void cleanupCluster(Lease lease) throws IOException {
        delete(base, lease);
    }

    // -----------------------------------------------------------------------------------------------

    private void delete(String path, Lease lease) throws IOException {
        expect(204, "DELETE", path, fenced(client.call("DELETE", path, json(fence(lease)))));
    }

    /** A body naming the lease: {@code "epoch"} and {@code "lease-id"}. */
    private static ObjectNode fence(Lease lease) {
        return fence(object(), lease);
    }

    private static ObjectNode fence(ObjectNode body, Lease lease) {
        return body.put("epoch", lease.epoch).put("lease-id", lease.leaseId);
    }

    private Write write(String method, String path, ObjectNode body, int... expected) throws IOException {
        JobstoreClient.Outcome out = fenced(client.call(method, path, json(body)));
        for (int status : expected) {
            if (out.status == status) {
                return new Write(out);
            }
        }
        throw client.unexpected(method, path, out);
    }

    private JobstoreClient.Outcome once(String method, String path, ObjectNode body, Duration timeout)
            throws IOException {
        return client.call(new JobstoreClient.Request(method, path, json(body)).attempts(1).timeout(timeout));
    }

    /**
     * One attempt of a conditional GET ({@code If-None-Match: etag} unless null) of at most
     * {@code timeout}: its outcome, or null for a 304 (nothing changed).
     */
    private JobstoreClient.Outcome poll(String path, String etag, Duration timeout) throws IOException {
        JobstoreClient.Request req = new JobstoreClient.Request("GET", path, null).attempts(1).timeout(timeout);
        if (etag != null) {
            req.header("If-None-Match", etag);
        }
        JobstoreClient.Outcome out = client.call(req);
        return out.status == 304 ? null : out;
    }

    private static String etag(JobstoreClient.Outcome out) {
        return out.headers.firstValue("ETag").orElse(null);
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
