package io.jobstore.flink.ha;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.IllegalConfigurationException;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;

/**
 * HTTP client of jobstore's result store API ({@code /v1/clusters/{cluster}/job-results} and
 * {@code /v1/clusters/{cluster}/application-results}), with the error mapping Flink's stores
 * expect:
 *
 * <ul>
 *   <li>409 on create: {@link IllegalStateException};
 *   <li>404 on mark-clean: {@link NoSuchElementException};
 *   <li>network errors, timeouts, 5xx, 408 and 429: retried with exponential backoff, then an
 *       {@link IOException};
 *   <li>any other unexpected answer (400, 401, 403, ...): an {@link IOException} at once.
 * </ul>
 *
 * <p>Every call is retried, create included: a retried create can meet a 409 caused by an earlier
 * attempt of the same call that reached the server although its answer was lost. Only in that
 * case the entry is read back; when it is dirty and its result equals the one being created, the
 * create counts as done. Otherwise (the first attempt answered 409, or the stored entry is clean
 * or differs) the 409 is an {@link IllegalStateException}, as Flink's contract asks.
 *
 * <p>The base URL may be a comma-separated list of jobstore replicas that share one database. The
 * client uses one replica at a time (the first at start) and moves on to the next one, for the
 * next attempt and for all later calls, when an attempt fails with a network error, a timeout or
 * a 5xx answer. The number of attempts per call stays {@code 1 + retries}; the pause before an
 * attempt is skipped when it goes to a replica not yet tried during this call. Each change of the
 * replica in use is logged.
 */
final class JobstoreClient {

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreClient.class);

    private static final Pattern CLUSTER_ID = Pattern.compile("[A-Za-z0-9._-]{1,128}");
    private static final Pattern ID = Pattern.compile("[0-9a-f]{32}");
    static final String USER_AGENT = "jobstore-flink-ha-plugin/" + Version.VERSION;

    /** The two kinds of result stores; they differ only in names. */
    enum Kind {
        JOB("job-results", "job", "job-id", "JobResult", "job result store", "Job result store"),
        APPLICATION(
                "application-results",
                "application",
                "application-id",
                "ApplicationResult",
                "application result store",
                "Application result store");

        final String collection;
        final String noun;
        /** The entry's field naming its id. */
        final String idField;
        /** Flink's class of the result. */
        final String flinkType;
        final String storeName;
        final String storeTitle;

        Kind(String collection, String noun, String idField, String flinkType, String storeName, String storeTitle) {
            this.collection = collection;
            this.noun = noun;
            this.idField = idField;
            this.flinkType = flinkType;
            this.storeName = storeName;
            this.storeTitle = storeTitle;
        }
    }

    private final HttpClient http;
    /** The replicas, in the configured order. */
    private final List<String> baseUrls;
    /** Index of the replica in use. */
    private final AtomicInteger current = new AtomicInteger();
    /** Index of the replica last logged as in use (-1: none yet). */
    private final AtomicInteger announced = new AtomicInteger(-1);
    private final String clusterId;
    private final String authorization;
    private final Duration timeout;
    private final int retries;
    private final long backoffMillis;
    private final long maxBackoffMillis;
    private final int pageSize;

    JobstoreClient(
            String baseUrl,
            String clusterId,
            String token,
            Duration timeout,
            int retries,
            Duration backoff,
            Duration maxBackoff,
            int pageSize) {
        List<String> urls = new ArrayList<>();
        for (String u : baseUrl.split(",")) {
            if (!u.trim().isEmpty()) {
                urls.add(u.trim().replaceAll("/+$", ""));
            }
        }
        if (urls.isEmpty()) {
            throw new IllegalArgumentException("no jobstore URL in '" + baseUrl + "'");
        }
        this.baseUrls = Collections.unmodifiableList(urls);
        this.clusterId = clusterId;
        this.authorization = token == null || token.isEmpty() ? null : "Bearer " + token;
        this.timeout = timeout;
        this.retries = retries;
        this.backoffMillis = Math.max(0, backoff.toMillis());
        this.maxBackoffMillis = Math.max(this.backoffMillis, maxBackoff.toMillis());
        this.pageSize = pageSize;
        this.http =
                HttpClient.newBuilder()
                        .version(HttpClient.Version.HTTP_1_1)
                        .connectTimeout(timeout)
                        .followRedirects(HttpClient.Redirect.NEVER)
                        .build();
    }

    /** Reads and validates the {@code jobstore.*} keys and the HA cluster id. */
    static JobstoreClient fromConfiguration(Configuration config) {
        String url = config.get(JobstoreOptions.URL);
        if (url == null || url.trim().isEmpty()) {
            throw new IllegalConfigurationException(
                    "The jobstore HA services need '"
                            + JobstoreOptions.URL.key()
                            + "' (e.g. http://127.0.0.1:8090) in Flink's configuration.");
        }
        List<String> replicas = new ArrayList<>();
        for (String part : url.split(",", -1)) {
            String one = part.trim();
            if (one.isEmpty()) {
                throw new IllegalConfigurationException(
                        "'"
                                + JobstoreOptions.URL.key()
                                + "' has an empty entry in its comma-separated list: "
                                + url);
            }
            validateUrl(one);
            if (replicas.contains(one.replaceAll("/+$", ""))) {
                throw new IllegalConfigurationException(
                        "'" + JobstoreOptions.URL.key() + "' lists " + one + " twice");
            }
            replicas.add(one.replaceAll("/+$", ""));
        }
        url = String.join(",", replicas);

        String token = config.get(JobstoreOptions.TOKEN);
        if ((token == null || token.trim().isEmpty()) && config.get(JobstoreOptions.TOKEN_FILE) != null) {
            String file = config.get(JobstoreOptions.TOKEN_FILE);
            try {
                token = new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new IllegalConfigurationException(
                        "Cannot read '" + JobstoreOptions.TOKEN_FILE.key() + "' " + file + ": " + e,
                        e);
            }
        }
        token = token == null ? null : token.trim();
        if (token != null && !token.isEmpty() && !token.matches("[\\x21-\\x7e]+")) {
            throw new IllegalConfigurationException(
                    "The jobstore token must be printable ASCII without spaces.");
        }

        Duration timeout = config.get(JobstoreOptions.TIMEOUT);
        if (timeout.isZero() || timeout.isNegative()) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.TIMEOUT.key() + "' must be positive, got " + timeout);
        }
        int retries = config.get(JobstoreOptions.RETRIES);
        if (retries < 0) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.RETRIES.key() + "' must be >= 0, got " + retries);
        }
        Duration backoff = config.get(JobstoreOptions.RETRY_BACKOFF);
        Duration maxBackoff = config.get(JobstoreOptions.RETRY_MAX_BACKOFF);
        if (backoff.isNegative() || maxBackoff.isNegative()) {
            throw new IllegalConfigurationException("jobstore retry backoffs must not be negative");
        }
        int pageSize = config.get(JobstoreOptions.PAGE_SIZE);
        if (pageSize < 1 || pageSize > 10000) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.PAGE_SIZE.key() + "' must be 1..10000, got " + pageSize);
        }
        return new JobstoreClient(
                url, clusterId(config), token, timeout, retries, backoff, maxBackoff, pageSize);
    }

    private static void validateUrl(String url) {
        URI uri;
        try {
            uri = URI.create(url);
        } catch (IllegalArgumentException e) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.URL.key() + "' is not a URL: " + url, e);
        }
        if (!"http".equalsIgnoreCase(uri.getScheme()) && !"https".equalsIgnoreCase(uri.getScheme())
                || uri.getHost() == null) {
            throw new IllegalConfigurationException(
                    "'"
                            + JobstoreOptions.URL.key()
                            + "' must be an http:// or https:// URL with a host, got: "
                            + url);
        }
        if (uri.getQuery() != null || uri.getFragment() != null) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.URL.key() + "' must not have a query or fragment: " + url);
        }
    }

    /**
     * The cluster id of the entries: Flink's {@code high-availability.cluster-id} without leading
     * slashes (Flink's default is "/default", a ZooKeeper-style path, which becomes "default").
     */
    static String clusterId(Configuration config) {
        String raw = config.get(HighAvailabilityOptions.HA_CLUSTER_ID);
        String id = raw == null ? "" : raw.trim().replaceFirst("^/+", "");
        if (!CLUSTER_ID.matcher(id).matches()) {
            throw new IllegalConfigurationException(
                    "'"
                            + HighAvailabilityOptions.HA_CLUSTER_ID.key()
                            + "' must be 1 to 128 of [A-Za-z0-9._-] (after leading slashes) for"
                            + " jobstore, got: '"
                            + raw
                            + "'");
        }
        return id;
    }

    String clusterId() {
        return clusterId;
    }

    /** The configured timeout of one attempt ({@code jobstore.timeout}). */
    Duration timeout() {
        return timeout;
    }

    /** The pause before the first retry ({@code jobstore.retry-backoff}). */
    Duration retryBackoff() {
        return Duration.ofMillis(backoffMillis);
    }

    /** The pause between retries at most ({@code jobstore.retry-max-backoff}). */
    Duration maxRetryBackoff() {
        return Duration.ofMillis(maxBackoffMillis);
    }

    /**
     * The same replicas, cluster, token and retries with another timeout of one attempt (connect
     * timeout included); the copy chooses its replica on its own.
     */
    JobstoreClient withTimeout(Duration perAttempt) {
        return new JobstoreClient(
                baseUrl(),
                clusterId,
                authorization == null ? null : authorization.substring("Bearer ".length()),
                perAttempt,
                retries,
                retryBackoff(),
                maxRetryBackoff(),
                pageSize);
    }

    /** The configured replica URL(s), comma-separated. */
    String baseUrl() {
        return String.join(",", baseUrls);
    }

    List<String> baseUrls() {
        return baseUrls;
    }

    /** The replica the next call goes to. */
    String currentUrl() {
        return baseUrls.get(current.get());
    }

    // ---------------------------------------------------------------------------------------
    // Operations
    // ---------------------------------------------------------------------------------------

    /**
     * {@code POST .../{collection}} with a Flink JRS/ARS file as body.
     *
     * @throws IllegalStateException if the id is already registered (dirty or clean)
     */
    void createDirty(Kind kind, String id, byte[] envelope) throws IOException {
        String path = collectionPath(kind);
        Outcome out = call("POST", path, envelope);
        if (out.status == 201 || out.status == 200) {
            return;
        }
        if (out.status == 409) {
            if (out.earlierAttemptMayHaveLanded && ourEarlierCreateLanded(kind, id, envelope)) {
                LOG.info(
                        "An earlier attempt of creating the dirty {} entry {} in jobstore"
                                + " succeeded although its answer was lost; treating the create"
                                + " as done.",
                        kind.noun,
                        id);
                return;
            }
            throw new IllegalStateException(
                    errorMessage(
                            out.body,
                            String.format(
                                    "%s already contains an entry for %s %s",
                                    kind.storeTitle, kind.noun, id)));
        }
        throw unexpected("POST", path, out);
    }

    private boolean ourEarlierCreateLanded(Kind kind, String id, byte[] envelope) throws IOException {
        JsonNode stored = get(kind, id);
        if (stored == null || !"dirty".equals(stored.path("state").asText())) {
            return false;
        }
        JsonNode sent = FlinkJson.parse(envelope).get("result");
        return FlinkJson.sameJson(sent, stored.get("result"));
    }

    /** {@code GET .../{collection}/{id}}: the entry, or null when there is none. */
    JsonNode get(Kind kind, String id) throws IOException {
        String path = entryPath(kind, id);
        Outcome out = call("GET", path, null);
        if (out.status == 200) {
            return parseObject("GET", path, out.body);
        }
        if (out.status == 404) {
            return null;
        }
        throw unexpected("GET", path, out);
    }

    /** {@code HEAD .../{collection}/{id}}: whether an entry (dirty or clean) exists. */
    boolean exists(Kind kind, String id) throws IOException {
        String path = entryPath(kind, id);
        Outcome out = call("HEAD", path, null);
        if (out.status == 200) {
            return true;
        }
        if (out.status == 404) {
            return false;
        }
        throw unexpected("HEAD", path, out);
    }

    /**
     * {@code POST .../{collection}/{id}/clean}; an entry that is already clean stays as it is.
     *
     * @throws NoSuchElementException if there is no entry for the id
     */
    void markClean(Kind kind, String id) throws IOException {
        String path = entryPath(kind, id) + "/clean";
        Outcome out = call("POST", path, null);
        if (out.status == 200 || out.status == 204) {
            return;
        }
        if (out.status == 404) {
            throw new NoSuchElementException(
                    String.format(
                            "Could not mark %s %s as clean as it is not present in the %s.",
                            kind.noun, id, kind.storeName));
        }
        throw unexpected("POST", path, out);
    }

    /** All dirty entries, following {@code next} page by page until it is null. */
    List<JsonNode> listDirty(Kind kind) throws IOException {
        List<JsonNode> entries = new ArrayList<>();
        String after = null;
        int pages = 0;
        while (true) {
            String path =
                    collectionPath(kind)
                            + "?state=dirty&limit="
                            + pageSize
                            + (after == null
                                    ? ""
                                    : "&after=" + URLEncoder.encode(after, StandardCharsets.UTF_8));
            Outcome out = call("GET", path, null);
            if (out.status != 200) {
                throw unexpected("GET", path, out);
            }
            JsonNode page = parseObject("GET", path, out.body);
            JsonNode items = page.get(kind.collection);
            if (items == null || !items.isArray()) {
                throw new IOException(
                        "jobstore GET " + path + ": answer has no '" + kind.collection + "' array");
            }
            items.forEach(entries::add);
            pages++;
            JsonNode next = page.get("next");
            if (next == null || next.isNull()) {
                break;
            }
            String cursor = next.asText();
            if (cursor.isEmpty() || cursor.equals(after) || items.size() == 0) {
                throw new IOException(
                        "jobstore GET "
                                + path
                                + ": paging does not advance (next="
                                + cursor
                                + ", "
                                + items.size()
                                + " entries)");
            }
            after = cursor;
        }
        LOG.debug("Listed {} dirty {} entries of cluster {} in {} page(s)", entries.size(), kind.noun, clusterId, pages);
        return entries;
    }

    // ---------------------------------------------------------------------------------------
    // HTTP with retries
    // ---------------------------------------------------------------------------------------

    /** One request: method, path (with query), body, and what differs from the defaults. */
    static final class Request {
        final String method;
        final String path;
        final byte[] body;
        private final List<String[]> headers = new ArrayList<>();
        /** Timeout of one attempt; null: the configured {@code jobstore.timeout}. */
        private Duration timeout;
        /** Attempts at most; 0: {@code 1 + jobstore.retries}. */
        private int attempts;

        Request(String method, String path, byte[] body) {
            this.method = method;
            this.path = path;
            this.body = body;
        }

        Request header(String name, String value) {
            headers.add(new String[] {name, value});
            return this;
        }

        Request timeout(Duration perAttempt) {
            this.timeout = perAttempt;
            return this;
        }

        Request attempts(int max) {
            this.attempts = max;
            return this;
        }

        @Override
        public String toString() {
            return method + " " + path;
        }
    }

    /** The final answer of a call, after retries. */
    static final class Outcome {
        final int status;
        final byte[] body;
        final HttpHeaders headers;
        /** An earlier attempt failed in a way that does not rule out that it was applied. */
        final boolean earlierAttemptMayHaveLanded;
        /** The replica that gave this answer. */
        final String base;

        Outcome(int status, byte[] body, HttpHeaders headers, boolean earlierAttemptMayHaveLanded, String base) {
            this.status = status;
            this.body = body;
            this.headers = headers;
            this.earlierAttemptMayHaveLanded = earlierAttemptMayHaveLanded;
            this.base = base;
        }
    }

    /**
     * Every attempt of a call failed (network error, timeout, 5xx, 408, 429). {@link
     * #mayHaveLanded()} tells whether one of them may nevertheless have been applied.
     */
    static final class UnavailableException extends IOException {
        private static final long serialVersionUID = 1L;
        private final boolean mayHaveLanded;

        UnavailableException(String message, Throwable cause, boolean mayHaveLanded) {
            super(message, cause);
            this.mayHaveLanded = mayHaveLanded;
        }

        boolean mayHaveLanded() {
            return mayHaveLanded;
        }
    }

    static boolean isRetryableStatus(int status) {
        return status >= 500 || status == 408 || status == 429;
    }

    Outcome call(String method, String path, byte[] body) throws IOException {
        return call(new Request(method, path, body));
    }

    Outcome call(Request req) throws IOException {
        int attempts = req.attempts > 0 ? req.attempts : retries + 1;
        boolean mayHaveLanded = false;
        long pause = backoffMillis;
        String problem = null;
        IOException cause = null;
        String lastBase = null;
        boolean[] tried = new boolean[baseUrls.size()];
        boolean switched = false;
        for (int attempt = 1; attempt <= attempts; attempt++) {
            int index = current.get();
            String base = baseUrls.get(index);
            if (attempt > 1) {
                // A replica not yet tried during this call is tried at once.
                if (!(switched && !tried[index])) {
                    sleep(pause, req);
                    pause = Math.min(maxBackoffMillis, pause * 2);
                }
            }
            tried[index] = true;
            switched = false;
            lastBase = base;
            boolean replicaFailed;
            try {
                HttpResponse<byte[]> response =
                        http.send(request(base, req), HttpResponse.BodyHandlers.ofByteArray());
                int status = response.statusCode();
                byte[] responseBody = response.body() == null ? new byte[0] : response.body();
                if (!isRetryableStatus(status)) {
                    announce(index);
                    return new Outcome(status, responseBody, response.headers(), mayHaveLanded, base);
                }
                problem = "HTTP " + status + ": " + errorMessage(responseBody, "(no message)");
                cause = null;
                mayHaveLanded = true;
                // 408 and 429 are retried on the same replica; 5xx moves on to the next.
                replicaFailed = status >= 500;
            } catch (ConnectException | HttpConnectTimeoutException e) {
                // The request was not sent: nothing can have been applied.
                problem = describe(e);
                cause = e;
                replicaFailed = true;
            } catch (InterruptedIOException e) {
                if (Thread.currentThread().isInterrupted()) {
                    throw e;
                }
                // A timeout of the whole request: it may have been applied.
                problem = describe(e);
                cause = e;
                mayHaveLanded = true;
                replicaFailed = true;
            } catch (IOException e) {
                problem = describe(e);
                cause = e;
                mayHaveLanded = true;
                replicaFailed = true;
            } catch (InterruptedException e) {
                throw interrupted("interrupted during jobstore ", req, e);
            }
            if (replicaFailed && baseUrls.size() > 1) {
                int next = (index + 1) % baseUrls.size();
                if (current.compareAndSet(index, next)) {
                    LOG.warn(
                            "jobstore replica {} failed ({}: {}); switching to replica {}",
                            base,
                            req,
                            problem,
                            baseUrls.get(next));
                }
                switched = true;
            }
            if (attempt < attempts) {
                int nextIndex = current.get();
                LOG.warn(
                        "jobstore {} {} failed (attempt {} of {}): {}; retrying {}",
                        req.method,
                        base + req.path,
                        attempt,
                        attempts,
                        problem,
                        switched && !tried[nextIndex]
                                ? "at once on " + baseUrls.get(nextIndex)
                                : "in " + pause + " ms on " + baseUrls.get(nextIndex));
            }
        }
        throw new UnavailableException(
                String.format(
                        "jobstore %s %s failed after %d attempt(s): %s",
                        req.method,
                        baseUrls.size() > 1
                                ? req.path + " (replicas " + String.join(", ", baseUrls) + ", last " + lastBase + ")"
                                : lastBase + req.path,
                        attempts,
                        problem),
                cause,
                mayHaveLanded);
    }

    /** Logs the replica in use when it is not the one logged last. */
    private void announce(int index) {
        int before = announced.getAndSet(index);
        if (before != index && baseUrls.size() > 1) {
            LOG.info(
                    "Using jobstore replica {} ({} of {}) for cluster {}",
                    baseUrls.get(index),
                    index + 1,
                    baseUrls.size(),
                    clusterId);
        }
    }

    private HttpRequest request(String base, Request req) {
        HttpRequest.Builder b =
                HttpRequest.newBuilder(URI.create(base + req.path))
                        .timeout(req.timeout == null ? timeout : req.timeout)
                        .header("User-Agent", USER_AGENT)
                        .header("Accept", "application/json");
        if (authorization != null) {
            b.header("Authorization", authorization);
        }
        for (String[] h : req.headers) {
            b.header(h[0], h[1]);
        }
        if (req.body != null) {
            b.header("Content-Type", "application/json");
            b.method(req.method, HttpRequest.BodyPublishers.ofByteArray(req.body));
        } else {
            b.method(req.method, HttpRequest.BodyPublishers.noBody());
        }
        return b.build();
    }

    private static void sleep(long millis, Request req) throws InterruptedIOException {
        if (millis <= 0) {
            return;
        }
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            throw interrupted("interrupted while retrying jobstore ", req, e);
        }
    }

    private static InterruptedIOException interrupted(String what, Request req, InterruptedException e) {
        Thread.currentThread().interrupt();
        InterruptedIOException ie = new InterruptedIOException(what + req);
        ie.initCause(e);
        return ie;
    }

    private String collectionPath(Kind kind) {
        return "/v1/clusters/" + clusterId + "/" + kind.collection;
    }

    private String entryPath(Kind kind, String id) {
        if (!ID.matcher(id).matches()) {
            throw new IllegalArgumentException("not a 32-hex-digit lowercase id: " + id);
        }
        return collectionPath(kind) + "/" + id;
    }

    IOException unexpected(String method, String path, Outcome out) {
        return new IOException(
                String.format(
                        "jobstore %s %s answered HTTP %d: %s",
                        method, out.base + path, out.status, errorMessage(out.body, "(no message)")));
    }

    static JsonNode parseObject(String method, String path, byte[] body) throws IOException {
        JsonNode node;
        try {
            node = FlinkJson.parse(body);
        } catch (IOException e) {
            throw new IOException("jobstore " + method + " " + path + ": answer is not JSON: " + e.getMessage(), e);
        }
        if (node == null || !node.isObject()) {
            throw new IOException("jobstore " + method + " " + path + ": answer is not a JSON object");
        }
        return node;
    }

    /** The first message of jobstore's {@code {"errors": [...]}} body, else a short excerpt. */
    static String errorMessage(byte[] body, String fallback) {
        if (body == null || body.length == 0) {
            return fallback;
        }
        try {
            JsonNode errors = FlinkJson.parse(body).path("errors");
            if (errors.isArray() && errors.size() > 0 && errors.get(0).isTextual()) {
                return errors.get(0).asText();
            }
        } catch (IOException | RuntimeException ignored) {
            // not JSON: fall through
        }
        String text = new String(body, StandardCharsets.UTF_8).trim();
        return text.isEmpty() ? fallback : (text.length() > 300 ? text.substring(0, 300) + "..." : text);
    }

    private static String describe(IOException e) {
        String m = e.getMessage();
        if ((m == null || m.isEmpty()) && e.getCause() != null) {
            m = e.getCause().getMessage();
        }
        if ((m == null || m.isEmpty()) && e instanceof ConnectException) {
            m = "cannot connect";
        }
        return e.getClass().getSimpleName() + (m == null || m.isEmpty() ? "" : ": " + m);
    }
}
