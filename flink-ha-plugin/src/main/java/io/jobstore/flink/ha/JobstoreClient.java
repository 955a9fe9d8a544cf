package io.jobstore.flink.ha;


import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The plugin's transport to jobstore: HTTP with retries and failover across replicas, used by
 * the result store API ({@link ResultStoreApi}) and the HA services' API ({@link HaApi}). Its
 * settings come from {@link JobstoreClientConfig}.
 *
 * <ul>
 *   <li>network errors, timeouts, 5xx, 408 and 429: retried with the pauses of {@link Backoff},
 *       then an {@link UnavailableException} that tells whether an attempt may have landed;
 *   <li>any other answer is the caller's to map ({@link Outcome}).
 * </ul>
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

    static final String USER_AGENT = "jobstore-flink-ha-plugin/" + Version.VERSION;

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

    /** A new sequence of retry pauses of the configured backoff, none shorter than floorMillis. */
    Backoff backoff(long floorMillis) {
        return new Backoff(retryBackoff(), maxRetryBackoff(), floorMillis);
    }

    /** Entries per page of a listing ({@code jobstore.page-size}). */
    int pageSize() {
        return pageSize;
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
        Backoff pause = backoff(0);
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
                    sleep(pause.next(), req);
                }
            }
            tried[index] = true;
            switched = false;
            lastBase = base;
            boolean replicaFailed;
            try {
                HttpResponse<byte[]> response = exchange(request(base, req), req);
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
                                : "in " + pause.peek() + " ms on " + baseUrls.get(nextIndex));
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

    /**
     * One exchange, its answer's body included, within the attempt's timeout. The JDK's own
     * request timeout ends once the answer's head arrived (JDK 17): an answer whose body stops
     * after its head would hold the caller for as long as the connection lives, the lease loop
     * past its term's deadline among them. Past the timeout the exchange is cancelled and the
     * attempt fails as a timeout (it may have been applied).
     */
    private HttpResponse<byte[]> exchange(HttpRequest request, Request req)
            throws IOException, InterruptedException {
        Duration limit = req.timeout == null ? timeout : req.timeout;
        CompletableFuture<HttpResponse<byte[]>> answer =
                http.sendAsync(request, HttpResponse.BodyHandlers.ofByteArray());
        try {
            return answer.get(limit.toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            answer.cancel(true);
            throw new HttpTimeoutException("no whole answer within " + limit);
        } catch (InterruptedException e) {
            answer.cancel(true);
            throw e;
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            while (cause instanceof CompletionException && cause.getCause() != null) {
                cause = cause.getCause();
            }
            if (cause instanceof IOException) {
                throw (IOException) cause;
            }
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            throw new IOException(cause);
        }
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
