package io.jobstore.flink.ha;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.time.Instant;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The HA routes of jobstore (docs/api.md "HA services" and the lead's additions: long poll with
 * ETag, mark-for-deletion, counter delete, job and cluster cleanup) in memory, on the fake's own
 * clock (System.nanoTime). Every acquisition draws a random lease id; writes naming an epoch or a
 * lease id that is not the cluster's live lease are 409 {@code fenced: ...}; unknown body fields
 * are 400. State-handle listings come in pages ({@code limit}, {@code after}, {@code next}). Test
 * hooks read the lease, the handles and the counters, expire leases, lose the last acquisition (as
 * a database failover that loses its commit), and make listing pages small. The lease's long poll
 * ({@code GET .../lease}) wakes at acquisitions, releases and the lease's expiry; the 409 of an
 * acquisition says how long the live lease has left ({@code Jobstore-Lease-Expires-In-Ms}).
 */
final class FakeJobstoreHa {

    /** A malformed request: 400. */
    static final class BadRequest extends RuntimeException {
        private static final long serialVersionUID = 1L;

        BadRequest(String message) {
            super(message);
        }
    }

    /** The lease row. */
    private static final class Lease {
        String holder;
        long epoch;
        String leaseId;
        long expiresNanos;

        Lease copy() {
            Lease l = new Lease();
            l.holder = holder;
            l.epoch = epoch;
            l.leaseId = leaseId;
            l.expiresNanos = expiresNanos;
            return l;
        }
    }

    private static final class Cluster {
        Lease lease;
        /** The lease row as it was before the last acquisition that drew a new lease id (null: none). */
        Lease beforeLastAcquisition;
        boolean acquired;
        /** lease id -> when its lease expired or expires (as last extended). */
        final Map<String, Long> expiryByLeaseId = new HashMap<>();
        final TreeMap<String, ObjectNode> leaderInfo = new TreeMap<>();
        long leaderVersion;
        /** kind \0 job \0 name -> entry. */
        final TreeMap<String, ObjectNode> handles = new TreeMap<>();
        final TreeMap<String, Long> counters = new TreeMap<>();
    }

    private static final Pattern HANDLE = Pattern.compile("^/state-handles/([a-z-]+)(?:/([^/]+)(/mark-for-deletion)?)?$");
    private static final Pattern COUNTER = Pattern.compile("^/counters/([0-9a-f]{32})(/get-and-increment)?$");
    private static final Pattern LEADER = Pattern.compile("^/leader-info(?:/([^/]+))?$");
    private static final Pattern JOB = Pattern.compile("^/jobs/([0-9a-f]{32})$");
    private static final Set<String> KINDS = new HashSet<>(Arrays.asList("execution-plan", "application", "checkpoint"));

    private final Map<String, Cluster> clusters = new HashMap<>();
    private boolean closed;
    /** Most handles a listing page holds whatever its limit (jobstore's byte cap, made small). */
    private int pageCap = Integer.MAX_VALUE;
    private long pages;
    /** Answer {@code GET .../lease} 404, as a jobstore without the route. */
    private boolean leaseRouteMissing;
    /** How many long polls of the lease were served. */
    private long leasePolls;

    synchronized FakeJobstore.Answer serve(
            String method, String cluster, String rest, Map<String, String> query, String ifNoneMatch, byte[] body)
            throws IOException {
        try {
            return route(method, cluster, rest, query, ifNoneMatch, body);
        } catch (Fenced e) {
            return conflict(FENCED);
        }
    }

    private static final String FENCED = "fenced: the epoch and lease id are not the cluster's live lease";

    private FakeJobstore.Answer route(
            String method, String cluster, String rest, Map<String, String> query, String ifNoneMatch, byte[] body)
            throws IOException {
        Cluster c = clusters.computeIfAbsent(cluster, k -> new Cluster());
        long now = System.nanoTime();
        if (rest.isEmpty() && method.equals("DELETE")) {
            fence(c, body(body, "epoch", "lease-id"), now);
            c.leaderInfo.clear();
            c.leaderVersion++;
            c.handles.clear();
            c.counters.clear();
            notifyAll();
            return new FakeJobstore.Answer(204, null);
        }
        if (rest.startsWith("/lease/") && method.equals("POST")) {
            return lease(c, rest.substring("/lease/".length()), body, now);
        }
        if (rest.equals("/lease")) {
            return pollLease(c, method, query, ifNoneMatch);
        }
        Matcher m = LEADER.matcher(rest);
        if (m.matches()) {
            return m.group(1) == null ? listLeaders(c, method, query, ifNoneMatch) : leader(c, method, m.group(1), body, now);
        }
        m = HANDLE.matcher(rest);
        if (m.matches()) {
            return handle(c, method, m.group(1), m.group(2), m.group(3) != null, query, body, now);
        }
        m = COUNTER.matcher(rest);
        if (m.matches()) {
            return counter(c, method, m.group(1), m.group(2) != null, body, now);
        }
        m = JOB.matcher(rest);
        if (m.matches() && method.equals("DELETE")) {
            fence(c, body(body, "epoch", "lease-id"), now);
            String job = m.group(1);
            if (c.leaderInfo.remove(job) != null) {
                c.leaderVersion++;
                notifyAll();
            }
            c.handles.values().removeIf(h -> job.equals(h.path("job").asText(null))
                    || (h.path("kind").asText().equals("execution-plan") && h.path("name").asText().equals(job)));
            c.counters.remove(job);
            return new FakeJobstore.Answer(204, null);
        }
        return new FakeJobstore.Answer(404, FakeJobstore.error("no route " + method + " " + rest));
    }

    // --- lease -----------------------------------------------------------------------------------

    private FakeJobstore.Answer lease(Cluster c, String op, byte[] raw, long now) {
        Lease l = c.lease;
        boolean live = l != null && now < l.expiresNanos;
        switch (op) {
            case "acquire": {
                ObjectNode b = body(raw, "holder", "duration-ms");
                String holder = text(b, "holder");
                long ms = positive(b, "duration-ms");
                if (live && !l.holder.equals(holder)) {
                    long left = Math.max(1, (l.expiresNanos - now + 999_999) / 1_000_000L);
                    return conflict("the lease is held by another holder and has not expired")
                            .header(HaApi.LEASE_EXPIRES_IN, Long.toString(left));
                }
                if (!live) {
                    c.beforeLastAcquisition = l == null ? null : l.copy();
                    c.acquired = true;
                    if (l == null) {
                        l = c.lease = new Lease();
                    }
                    l.epoch++;
                    l.leaseId = UUID.randomUUID().toString();
                }
                l.holder = holder;
                extend(c, now, ms);
                notifyAll();
                ObjectNode out = FlinkJson.MAPPER.createObjectNode();
                out.put("epoch", l.epoch);
                out.put("lease-id", l.leaseId);
                out.put("expires-at", Instant.now().plusMillis(ms).toString());
                return FakeJobstore.json(200, out);
            }
            case "renew": {
                ObjectNode b = body(raw, "holder", "epoch", "lease-id", "duration-ms");
                long ms = positive(b, "duration-ms");
                String holder = text(b, "holder");
                if (!live || !l.holder.equals(holder) || l.epoch != epochOf(b) || !l.leaseId.equals(leaseIdOf(b))) {
                    return conflict(FENCED);
                }
                extend(c, now, ms);
                ObjectNode out = FlinkJson.MAPPER.createObjectNode();
                out.put("epoch", l.epoch);
                return FakeJobstore.json(200, out);
            }
            case "release": {
                ObjectNode b = body(raw, "holder", "epoch", "lease-id");
                String holder = text(b, "holder");
                long epoch = epochOf(b);
                String leaseId = leaseIdOf(b);
                boolean released = live && l.holder.equals(holder) && l.epoch == epoch && l.leaseId.equals(leaseId);
                if (released) {
                    l.expiresNanos = now;
                    c.expiryByLeaseId.put(l.leaseId, now);
                    notifyAll();
                }
                ObjectNode out = FlinkJson.MAPPER.createObjectNode();
                out.put("released", released);
                return FakeJobstore.json(200, out);
            }
            default:
                return new FakeJobstore.Answer(404, FakeJobstore.error("no route"));
        }
    }

    /**
     * {@code GET .../lease}: the lease (never its lease id) with an ETag of its holder, epoch and
     * liveness, or 404 when never leased; with {@code If-None-Match} naming the current tag, waits up
     * to {@code wait-ms} for a change, the lease's expiry included, then answers it, or 304.
     */
    private FakeJobstore.Answer pollLease(Cluster c, String method, Map<String, String> query, String ifNoneMatch) {
        if (!method.equals("GET")) {
            return new FakeJobstore.Answer(405, FakeJobstore.error("method not allowed"));
        }
        if (leaseRouteMissing) {
            return new FakeJobstore.Answer(404, FakeJobstore.error("no route GET /lease"));
        }
        long waitMs = Long.parseLong(query.getOrDefault("wait-ms", "0"));
        if (waitMs < 0 || waitMs > 60_000) {
            throw new BadRequest("wait-ms must be 0 to 60000");
        }
        leasePolls++;
        long until = System.nanoTime() + waitMs * 1_000_000L;
        while (leaseTag(c).equals(ifNoneMatch) && !closed) {
            long now = System.nanoTime();
            long left = until - now;
            if (left <= 0) {
                return new FakeJobstore.Answer(304, null).header("ETag", leaseTag(c));
            }
            if (c.lease != null && now < c.lease.expiresNanos) {
                // The expiry changes the tag with no write: wake up right after it.
                left = Math.min(left, c.lease.expiresNanos - now + 1_000_000L);
            }
            try {
                wait(Math.max(1, left / 1_000_000L));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        if (c.lease == null) {
            return new FakeJobstore.Answer(404, FakeJobstore.error("never leased")).header("ETag", leaseTag(c));
        }
        long now = System.nanoTime();
        boolean live = now < c.lease.expiresNanos;
        ObjectNode out = FlinkJson.MAPPER.createObjectNode();
        out.put("holder", c.lease.holder);
        out.put("epoch", c.lease.epoch);
        out.put("expires-at", Instant.now().plusNanos(Math.max(0, c.lease.expiresNanos - now)).toString());
        out.put("expires-in-ms", live ? Math.max(1, (c.lease.expiresNanos - now + 999_999) / 1_000_000L) : 0);
        out.put("live", live);
        return FakeJobstore.json(200, out).header("ETag", leaseTag(c));
    }

    /** The tag of the lease: its holder, epoch and whether it is live (as jobstore's). */
    private static String leaseTag(Cluster c) {
        if (c.lease == null) {
            return "\"never\"";
        }
        boolean live = System.nanoTime() < c.lease.expiresNanos;
        return "\"" + Integer.toHexString(c.lease.holder.hashCode()) + "-" + c.lease.epoch + "-" + live + "\"";
    }

    private static void extend(Cluster c, long now, long ms) {
        c.lease.expiresNanos = now + ms * 1_000_000L;
        c.expiryByLeaseId.put(c.lease.leaseId, c.lease.expiresNanos);
    }

    /** The body's epoch and lease id (both required) name the live lease, else {@link Fenced}. */
    private static void fence(Cluster c, ObjectNode b, long now) {
        long epoch = epochOf(b);
        String leaseId = leaseIdOf(b);
        if (c.lease == null || c.lease.epoch != epoch || !c.lease.leaseId.equals(leaseId) || now >= c.lease.expiresNanos) {
            throw new Fenced();
        }
    }

    /** Thrown by {@link #fence}; answered 409 fenced. */
    private static final class Fenced extends RuntimeException {
        private static final long serialVersionUID = 1L;
    }

    // --- leader information -------------------------------------------------------------------------

    private FakeJobstore.Answer listLeaders(Cluster c, String method, Map<String, String> query, String ifNoneMatch) {
        if (!method.equals("GET")) {
            return new FakeJobstore.Answer(405, FakeJobstore.error("method not allowed"));
        }
        long waitMs = Long.parseLong(query.getOrDefault("wait-ms", "0"));
        if (waitMs < 0 || waitMs > 60_000) {
            throw new BadRequest("wait-ms must be 0 to 60000");
        }
        long until = System.nanoTime() + waitMs * 1_000_000L;
        while (etag(c).equals(ifNoneMatch) && !closed) {
            long left = until - System.nanoTime();
            if (left <= 0) {
                return new FakeJobstore.Answer(304, null).header("ETag", etag(c));
            }
            try {
                wait(Math.max(1, left / 1_000_000L));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        ObjectNode out = FlinkJson.MAPPER.createObjectNode();
        ArrayNode all = out.putArray("leader-info");
        c.leaderInfo.values().forEach(all::add);
        return FakeJobstore.json(200, out).header("ETag", etag(c));
    }

    private static String etag(Cluster c) {
        return "\"v" + c.leaderVersion + "\"";
    }

    private FakeJobstore.Answer leader(Cluster c, String method, String component, byte[] raw, long now) {
        switch (method) {
            case "GET": {
                ObjectNode i = c.leaderInfo.get(component);
                return i == null ? new FakeJobstore.Answer(404, FakeJobstore.error("no leader information")) : FakeJobstore.json(200, i);
            }
            case "PUT": {
                ObjectNode b = body(raw, "epoch", "lease-id", "address", "session-id");
                long epoch = epochOf(b);
                if (!fenced(c, b, now)) {
                    ObjectNode i = FlinkJson.MAPPER.createObjectNode();
                    i.put("component", component);
                    i.put("epoch", epoch);
                    i.put("address", text(b, "address"));
                    i.put("session-id", text(b, "session-id"));
                    i.put("updated-at", Instant.now().toString());
                    c.leaderInfo.put(component, i);
                    c.leaderVersion++;
                    notifyAll();
                    return FakeJobstore.json(200, i);
                }
                return conflict(FENCED);
            }
            case "DELETE": {
                if (fenced(c, body(raw, "epoch", "lease-id"), now)) {
                    return conflict(FENCED);
                }
                if (c.leaderInfo.remove(component) != null) {
                    c.leaderVersion++;
                    notifyAll();
                }
                return new FakeJobstore.Answer(204, null);
            }
            default:
                return new FakeJobstore.Answer(405, FakeJobstore.error("method not allowed"));
        }
    }

    private static boolean fenced(Cluster c, ObjectNode b, long now) {
        try {
            fence(c, b, now);
            return false;
        } catch (Fenced e) {
            return true;
        }
    }

    // --- state handles -----------------------------------------------------------------------------

    private FakeJobstore.Answer handle(
            Cluster c, String method, String kind, String name, boolean mark, Map<String, String> query, byte[] raw, long now) {
        if (!KINDS.contains(kind)) {
            throw new BadRequest("kind must be execution-plan, application or checkpoint");
        }
        if (name == null) {
            if (!method.equals("GET")) {
                return new FakeJobstore.Answer(405, FakeJobstore.error("method not allowed"));
            }
            for (String q : query.keySet()) {
                if (!Arrays.asList("job", "limit", "after").contains(q)) {
                    throw new BadRequest("unknown query parameter " + q);
                }
            }
            String job = query.get("job");
            int limit = 1000;
            if (query.containsKey("limit")) {
                try {
                    limit = Integer.parseInt(query.get("limit"));
                } catch (NumberFormatException e) {
                    limit = -1;
                }
                if (limit < 1 || limit > 10_000) {
                    throw new BadRequest("limit must be 1 to 10000");
                }
            }
            String after = query.get("after");
            ObjectNode out = FlinkJson.MAPPER.createObjectNode();
            ArrayNode all = out.putArray("state-handles");
            String last = null;
            boolean more = false;
            for (ObjectNode h : c.handles.values()) {
                String entry = h.path("name").asText();
                if (!h.path("kind").asText().equals(kind)
                        || !(job == null ? h.path("job").isNull() : job.equals(h.path("job").asText(null)))
                        || (after != null && entry.compareTo(after) <= 0)) {
                    continue;
                }
                if (all.size() >= Math.min(limit, pageCap)) {
                    more = true;
                    break;
                }
                all.add(h);
                last = entry;
            }
            // the handles map is ordered by kind, job, name: one kind and job come in name order
            if (more) {
                out.put("next", last);
            } else {
                out.putNull("next");
            }
            pages++;
            return FakeJobstore.json(200, out);
        }
        if (method.equals("GET")) {
            ObjectNode h = c.handles.get(key(kind, query.get("job"), name));
            return h == null ? notFound() : FakeJobstore.json(200, h);
        }
        ObjectNode b =
                mark || method.equals("DELETE")
                        ? body(raw, "epoch", "lease-id", "job")
                        : method.equals("POST")
                                ? body(raw, "epoch", "lease-id", "job", "handle")
                                : body(raw, "epoch", "lease-id", "job", "expected-version", "handle");
        String job = b.hasNonNull("job") ? b.get("job").asText() : null;
        String key = key(kind, job, name);
        if (fenced(c, b, now)) {
            return conflict(FENCED);
        }
        ObjectNode h = c.handles.get(key);
        ObjectNode version = FlinkJson.MAPPER.createObjectNode();
        if (mark) {
            if (h == null) {
                return notFound();
            }
            h.put("marked-for-deletion", true);
            return FakeJobstore.json(200, version.put("version", h.path("version").asLong()));
        }
        switch (method) {
            case "POST":
                if (h != null) {
                    return conflict("the state handle already exists");
                }
                h = FlinkJson.MAPPER.createObjectNode();
                h.put("kind", kind);
                if (job == null) {
                    h.putNull("job");
                } else {
                    h.put("job", job);
                }
                h.put("name", name);
                h.put("version", 1);
                h.put("handle", hex(b));
                h.put("marked-for-deletion", false);
                h.put("updated-at", Instant.now().toString());
                c.handles.put(key, h);
                return FakeJobstore.json(201, version.put("version", 1));
            case "PUT":
                if (h == null || h.path("marked-for-deletion").asBoolean()) {
                    return notFound();
                }
                if (h.path("version").asLong() != positive(b, "expected-version")) {
                    return conflict("the state handle has another version");
                }
                h.put("version", h.path("version").asLong() + 1);
                h.put("handle", hex(b));
                h.put("updated-at", Instant.now().toString());
                return FakeJobstore.json(200, version.put("version", h.path("version").asLong()));
            case "DELETE":
                ObjectNode out = FlinkJson.MAPPER.createObjectNode();
                out.put("removed", c.handles.remove(key) != null);
                return FakeJobstore.json(200, out);
            default:
                return new FakeJobstore.Answer(405, FakeJobstore.error("method not allowed"));
        }
    }

    private static String key(String kind, String job, String name) {
        return kind + "\0" + (job == null ? "" : job) + "\0" + name;
    }

    private static String hex(ObjectNode b) {
        String h = text(b, "handle");
        if (!h.matches("([0-9a-f]{2}){1,65536}")) {
            throw new BadRequest("handle must be 1 to 65536 bytes as hex");
        }
        return h;
    }

    // --- counters -------------------------------------------------------------------------------

    private FakeJobstore.Answer counter(Cluster c, String method, String job, boolean increment, byte[] raw, long now) {
        ObjectNode out = FlinkJson.MAPPER.createObjectNode();
        if (method.equals("GET") && !increment) {
            Long v = c.counters.get(job);
            return v == null ? notFound() : FakeJobstore.json(200, out.put("value", v));
        }
        ObjectNode b = method.equals("PUT") ? body(raw, "epoch", "lease-id", "value") : body(raw, "epoch", "lease-id");
        if (fenced(c, b, now)) {
            return conflict(FENCED);
        }
        if (increment && method.equals("POST")) {
            long v = c.counters.getOrDefault(job, 1L);
            c.counters.put(job, v + 1);
            return FakeJobstore.json(200, out.put("value", v));
        }
        if (method.equals("PUT")) {
            long v = positive(b, "value");
            c.counters.put(job, v);
            return FakeJobstore.json(200, out.put("value", v));
        }
        if (method.equals("DELETE")) {
            c.counters.remove(job);
            return new FakeJobstore.Answer(204, null);
        }
        return new FakeJobstore.Answer(405, FakeJobstore.error("method not allowed"));
    }

    // --- bodies -------------------------------------------------------------------------------------

    private static ObjectNode body(byte[] raw, String... allowed) {
        JsonNode n;
        try {
            n = FlinkJson.parse(raw);
        } catch (IOException e) {
            throw new BadRequest("malformed body: " + e.getMessage());
        }
        if (n == null || !n.isObject()) {
            throw new BadRequest("body must be a JSON object");
        }
        List<String> ok = Arrays.asList(allowed);
        for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
            String f = it.next();
            if (!ok.contains(f)) {
                throw new BadRequest("unknown field " + f);
            }
        }
        return (ObjectNode) n;
    }

    private static String text(ObjectNode b, String field) {
        JsonNode v = b.get(field);
        if (v == null || !v.isTextual() || v.asText().isEmpty()) {
            throw new BadRequest(field + " is required");
        }
        return v.asText();
    }

    private static long epochOf(ObjectNode b) {
        JsonNode v = b.get("epoch");
        if (v == null || !v.isIntegralNumber()) {
            throw new BadRequest("epoch is required");
        }
        return v.asLong();
    }

    /** The body's lease id: required, a hyphenated UUID (36 characters), else 400. */
    private static String leaseIdOf(ObjectNode b) {
        JsonNode v = b.get("lease-id");
        if (v == null || !v.isTextual()) {
            throw new BadRequest("lease-id is required");
        }
        String id = v.asText();
        if (id.length() != 36 || !id.matches("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")) {
            throw new BadRequest("lease-id must be the UUID (8-4-4-4-12 hex digits) that the acquisition answered");
        }
        return id.toLowerCase(java.util.Locale.ROOT);
    }

    private static long positive(ObjectNode b, String field) {
        JsonNode v = b.get(field);
        if (v == null || !v.isIntegralNumber() || v.asLong() < 1) {
            throw new BadRequest(field + " must be at least 1");
        }
        return v.asLong();
    }

    private static FakeJobstore.Answer conflict(String message) {
        return new FakeJobstore.Answer(409, FakeJobstore.error(message));
    }

    private static FakeJobstore.Answer notFound() {
        return new FakeJobstore.Answer(404, FakeJobstore.error("no such entry"));
    }

    // --- test hooks ----------------------------------------------------------------------------------

    /** The live lease's epoch (0: none live). */
    synchronized long liveEpoch(String cluster) {
        HaApi.Lease l = liveLease(cluster);
        return l == null ? 0 : l.epoch;
    }

    /** The live lease (null: none live). */
    synchronized HaApi.Lease liveLease(String cluster) {
        Cluster c = clusters.get(cluster);
        return c == null || c.lease == null || System.nanoTime() >= c.lease.expiresNanos
                ? null
                : new HaApi.Lease(c.lease.epoch, c.lease.leaseId);
    }

    synchronized String liveHolder(String cluster) {
        return liveLease(cluster) == null ? null : clusters.get(cluster).lease.holder;
    }

    /** When (System.nanoTime) the lease of that lease id expired or expires, as last extended. */
    synchronized long expiryNanos(String cluster, String leaseId) {
        Long e = clusters.get(cluster).expiryByLeaseId.get(leaseId);
        return e == null ? Long.MIN_VALUE : e;
    }

    /** Ends the live lease now (as if it had expired). */
    synchronized void expire(String cluster) {
        Cluster c = clusters.get(cluster);
        if (c != null && c.lease != null) {
            c.lease.expiresNanos = System.nanoTime();
            c.expiryByLeaseId.put(c.lease.leaseId, c.lease.expiresNanos);
            notifyAll();
        }
    }

    /**
     * Loses the last acquisition, as a database failover that loses its commit: the lease row goes
     * back to what it was before (the previous epoch, lease id, holder and expiry; no row before
     * the first acquisition). The HA entries written under the lost lease stay (a test that needs
     * them gone removes them). The next acquisition by anyone then gets the lost epoch again, with a
     * new lease id.
     */
    synchronized void loseLastAcquisition(String cluster) {
        Cluster c = clusters.get(cluster);
        if (c == null || !c.acquired) {
            throw new IllegalStateException("no acquisition to lose in cluster " + cluster);
        }
        c.lease = c.beforeLastAcquisition;
        c.beforeLastAcquisition = null;
        c.acquired = false;
    }

    /** From now on {@code GET .../lease} answers 404 (true), as a jobstore without the route, or is served. */
    synchronized void leaseRouteMissing(boolean missing) {
        leaseRouteMissing = missing;
    }

    /** How many requests of {@code GET .../lease} were served. */
    synchronized long leasePolls() {
        return leasePolls;
    }

    /** Listing pages hold at most this many handles from now on (at least 1), whatever their limit. */
    synchronized void pageCap(int handles) {
        pageCap = Math.max(1, handles);
    }

    /** How many listing pages were served. */
    synchronized long pages() {
        return pages;
    }

    synchronized JsonNode handleEntry(String cluster, String kind, String job, String name) {
        Cluster c = clusters.get(cluster);
        return c == null ? null : c.handles.get(key(kind, job, name));
    }

    synchronized int handleCount(String cluster) {
        Cluster c = clusters.get(cluster);
        return c == null ? 0 : c.handles.size();
    }

    synchronized Long counterValue(String cluster, String job) {
        Cluster c = clusters.get(cluster);
        return c == null ? null : c.counters.get(job);
    }

    synchronized JsonNode leaderEntry(String cluster, String component) {
        Cluster c = clusters.get(cluster);
        return c == null ? null : c.leaderInfo.get(component);
    }

    synchronized void close() {
        closed = true;
        notifyAll();
    }
}
