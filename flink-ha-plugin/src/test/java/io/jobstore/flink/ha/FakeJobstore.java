package io.jobstore.flink.ha;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * An in-memory stand-in for jobstore's API (the result stores and, in {@link FakeJobstoreHa}, the
 * HA routes), with fault injection, for the plugin's self-test without a database. It can listen
 * on several ports at once ({@link #addReplica()}): replicas of one store, one of which can be
 * stopped.
 */
final class FakeJobstore implements AutoCloseable {

    /** What to do with a matching request instead of (or after) serving it. */
    enum Fault {
        /** Answer 503 without touching the store. */
        STATUS_503,
        /** Answer 429 without touching the store. */
        STATUS_429,
        /** Serve the request, then answer 503 (the answer of an applied write is lost). */
        APPLY_THEN_503,
        /** Close the connection without an answer, store untouched. */
        DROP,
        /** Serve the request, then close the connection without an answer. */
        APPLY_THEN_DROP,
        /** Do not answer until {@link #releaseHung()} or the fake closes (a frozen replica). */
        HANG,
        /**
         * Serve the request, send the answer's head and the first byte of its body, and hold the
         * rest until {@link #releaseHung()} or the fake closes (a replica frozen mid-answer).
         */
        APPLY_THEN_STALL
    }

    static final class Request {
        final String method;
        final String path;
        final String authorization;
        final long nanos = System.nanoTime();
        /** The port (replica) the request came to. */
        final int port;
        /** The body as text (empty for none). */
        volatile String body = "";
        /** The status answered (0: none yet, -1: the connection was closed without an answer). */
        volatile int status;

        Request(String method, String path, String authorization, int port) {
            this.method = method;
            this.path = path;
            this.authorization = authorization;
            this.port = port;
        }

        @Override
        public String toString() {
            return method + " " + path;
        }
    }

    /** An answer: status, JSON body (or none), extra headers. */
    static final class Answer {
        final int status;
        final byte[] body;
        final Map<String, String> headers = new LinkedHashMap<>();

        Answer(int status, byte[] body) {
            this.status = status;
            this.body = body;
        }

        Answer header(String name, String value) {
            headers.put(name, value);
            return this;
        }
    }

    /** A fault for requests of a method (and path part), a number of times (-1: until cleared). */
    private static final class Rule {
        final String method;
        final String pathPart;
        final Fault fault;
        int remaining;

        Rule(String method, String pathPart, Fault fault, int remaining) {
            this.method = method;
            this.pathPart = pathPart;
            this.fault = fault;
            this.remaining = remaining;
        }
    }

    private static final Pattern RESULTS =
            Pattern.compile(
                    "^/v1/clusters/([A-Za-z0-9._-]{1,128})/(job-results|application-results)(?:/([0-9a-fA-F]{32})(/clean)?)?$");
    private static final Pattern HA = Pattern.compile("^/v1/clusters/([A-Za-z0-9._-]{1,128})/ha(/.*)?$");

    private final Map<String, HttpServer> servers = Collections.synchronizedMap(new LinkedHashMap<>());
    private final ExecutorService executor =
            Executors.newCachedThreadPool(r -> {
                Thread t = new Thread(r, "fake-jobstore");
                t.setDaemon(true);
                return t;
            });
    /** cluster + "/" + collection -> id -> entry. */
    private final Map<String, TreeMap<String, ObjectNode>> data = new HashMap<>();
    private final List<Rule> rules = new ArrayList<>();
    private final List<Request> requests = Collections.synchronizedList(new ArrayList<>());
    private final Object hung = new Object();
    private long hungGeneration;
    private volatile boolean closed;
    private volatile String requiredToken;
    final FakeJobstoreHa ha = new FakeJobstoreHa();

    FakeJobstore() throws IOException {
        this(0);
    }

    FakeJobstore(int port) throws IOException {
        listen(port);
    }

    private String listen(int port) throws IOException {
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        server.createContext("/", this::handle);
        server.setExecutor(executor);
        server.start();
        String url = "http://127.0.0.1:" + server.getAddress().getPort();
        servers.put(url, server);
        return url;
    }

    /** The first replica's URL. */
    String url() {
        synchronized (servers) {
            return servers.keySet().iterator().next();
        }
    }

    /** Another replica of the same store, on its own port. */
    String addReplica() throws IOException {
        return listen(0);
    }

    /** Stops one replica (its port then refuses connections); the others keep serving. */
    void stopReplica(String url) {
        HttpServer s = servers.remove(url);
        if (s != null) {
            s.stop(0);
        }
    }

    void requireToken(String token) {
        requiredToken = token;
    }

    /** Faults for the next requests with this method (in order); none: clears them. */
    synchronized void failNext(String method, Fault... next) {
        rules.removeIf(r -> r.method.equals(method) && r.pathPart == null);
        for (Fault f : next) {
            rules.add(new Rule(method, null, f, 1));
        }
    }

    /** A fault for requests of this method whose path contains pathPart, times times (-1: always). */
    synchronized void fail(String method, String pathPart, Fault fault, int times) {
        rules.add(new Rule(method, pathPart, fault, times));
    }

    /** Clears every fault rule and lets hung requests go (they are then served). */
    void clearFaults() {
        synchronized (this) {
            rules.clear();
        }
        releaseHung();
    }

    void releaseHung() {
        synchronized (hung) {
            hungGeneration++;
            hung.notifyAll();
        }
    }

    List<Request> requests() {
        synchronized (requests) {
            return new ArrayList<>(requests);
        }
    }

    /** The requests whose method and path (query included) contain these parts. */
    List<Request> requests(String method, String pathPart) {
        List<Request> out = new ArrayList<>();
        for (Request r : requests()) {
            if (r.method.equals(method) && r.path.contains(pathPart)) {
                out.add(r);
            }
        }
        return out;
    }

    void clearRequests() {
        requests.clear();
    }

    /** Puts a raw entry (e.g. an unreadable one) directly into the store. */
    synchronized void putRaw(String cluster, String collection, String id, String state, JsonNode result) {
        ObjectNode e = FlinkJson.MAPPER.createObjectNode();
        e.put("cluster-id", cluster);
        e.put(collection.equals("job-results") ? "job-id" : "application-id", id);
        e.put("state", state);
        e.put("created-at", Instant.now().toString());
        e.putNull("cleaned-at");
        e.set("result", result);
        data.computeIfAbsent(cluster + "/" + collection, k -> new TreeMap<>()).put(id, e);
    }

    private synchronized Fault takeFault(String method, String path) {
        for (Iterator<Rule> it = rules.iterator(); it.hasNext(); ) {
            Rule r = it.next();
            if (r.method.equals(method) && (r.pathPart == null || path.contains(r.pathPart))) {
                if (r.remaining > 0 && --r.remaining == 0) {
                    it.remove();
                }
                return r.fault;
            }
        }
        return null;
    }

    private void handle(HttpExchange ex) throws IOException {
        Request request = null;
        try {
            String method = ex.getRequestMethod();
            URI uri = ex.getRequestURI();
            String path = uri.getRawPath() + (uri.getRawQuery() == null ? "" : "?" + uri.getRawQuery());
            request =
                    new Request(method, path, ex.getRequestHeaders().getFirst("Authorization"), ex.getLocalAddress().getPort());
            requests.add(request);
            byte[] body = ex.getRequestBody().readAllBytes();
            request.body = new String(body, StandardCharsets.UTF_8);
            Fault fault = takeFault(method, path);
            if (fault == Fault.HANG) {
                awaitRelease();
                fault = null;
            }
            if (fault == Fault.STATUS_429 || fault == Fault.STATUS_503) {
                request.status = fault == Fault.STATUS_429 ? 429 : 503;
                send(ex, new Answer(request.status, error("injected " + fault)));
                return;
            }
            if (fault == Fault.DROP) {
                request.status = -1;
                ex.close();
                return;
            }
            if (requiredToken != null
                    && !("Bearer " + requiredToken).equals(ex.getRequestHeaders().getFirst("Authorization"))) {
                request.status = 401;
                send(ex, new Answer(401, error("missing or wrong token")));
                return;
            }
            Answer answer;
            Matcher ha = HA.matcher(uri.getRawPath());
            if (ha.matches()) {
                answer = this.ha.serve(method, ha.group(1), ha.group(2) == null ? "" : ha.group(2),
                        query(uri.getRawQuery()), ex.getRequestHeaders().getFirst("If-None-Match"), body);
            } else {
                answer = serveResults(method, uri, body);
            }
            if (fault == Fault.APPLY_THEN_503) {
                request.status = 503;
                send(ex, new Answer(503, error("database unreachable")));
            } else if (fault == Fault.APPLY_THEN_DROP) {
                request.status = -1;
                ex.close();
            } else if (fault == Fault.APPLY_THEN_STALL && answer.body != null && answer.body.length > 1) {
                request.status = answer.status;
                stall(ex, answer);
            } else {
                request.status = answer.status;
                send(ex, answer);
            }
        } catch (FakeJobstoreHa.BadRequest e) {
            if (request != null) {
                request.status = 400;
            }
            send(ex, new Answer(400, error(e.getMessage())));
        } catch (RuntimeException e) {
            if (request != null) {
                request.status = 500;
            }
            send(ex, new Answer(500, error("fake jobstore: " + e)));
        }
    }

    private void awaitRelease() {
        synchronized (hung) {
            long generation = hungGeneration;
            long until = System.currentTimeMillis() + 30_000;
            while (generation == hungGeneration && !closed && System.currentTimeMillis() < until) {
                try {
                    hung.wait(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    private synchronized Answer serveResults(String method, URI uri, byte[] body) throws IOException {
        Matcher m = RESULTS.matcher(uri.getRawPath());
        if (!m.matches()) {
            return new Answer(404, error("no route"));
        }
        String cluster = m.group(1);
        String collection = m.group(2);
        String id = m.group(3) == null ? null : m.group(3).toLowerCase();
        boolean clean = m.group(4) != null;
        boolean jobs = collection.equals("job-results");
        TreeMap<String, ObjectNode> store =
                data.computeIfAbsent(cluster + "/" + collection, k -> new TreeMap<>());

        if (id == null && method.equals("POST")) {
            JsonNode envelope = FlinkJson.parse(body);
            JsonNode result = envelope.get("result");
            String newId = result.path(jobs ? "id" : "application-id").asText().toLowerCase();
            if (store.containsKey(newId)) {
                return new Answer(
                        409,
                        error((jobs ? "Job" : "Application") + " result store already contains an entry for "
                                + (jobs ? "job " : "application ") + newId));
            }
            putRaw(cluster, collection, newId, "dirty", result);
            return json(201, store.get(newId));
        }
        if (id == null && method.equals("GET")) {
            Map<String, String> q = query(uri.getRawQuery());
            String state = q.getOrDefault("state", "all");
            int limit = Integer.parseInt(q.getOrDefault("limit", "1000"));
            String after = q.get("after");
            ObjectNode page = FlinkJson.MAPPER.createObjectNode();
            ArrayNode items = page.putArray(collection);
            String last = null;
            boolean more = false;
            for (Map.Entry<String, ObjectNode> e :
                    (after == null ? store : store.tailMap(after, false)).entrySet()) {
                if (!state.equals("all") && !state.equals(e.getValue().path("state").asText())) {
                    continue;
                }
                if (items.size() == limit) {
                    more = true;
                    break;
                }
                items.add(e.getValue());
                last = e.getKey();
            }
            if (more) {
                page.put("next", last);
            } else {
                page.putNull("next");
            }
            return json(200, page);
        }
        ObjectNode e = id == null ? null : store.get(id);
        if (id != null && clean && method.equals("POST")) {
            if (e == null) {
                return new Answer(
                        404,
                        error("Could not mark " + (jobs ? "job " : "application ") + id
                                + " as clean as it is not present in the job result store."));
            }
            if (!"clean".equals(e.path("state").asText())) {
                e.put("state", "clean");
                e.put("cleaned-at", Instant.now().toString());
            }
            return json(200, e);
        }
        if (id != null && !clean && (method.equals("GET") || method.equals("HEAD"))) {
            boolean head = method.equals("HEAD");
            if (e == null) {
                return new Answer(404, head ? null : error("not found"));
            }
            return head ? new Answer(200, null) : json(200, e);
        }
        return new Answer(405, error("method not allowed"));
    }

    static Map<String, String> query(String raw) {
        Map<String, String> q = new HashMap<>();
        if (raw == null) {
            return q;
        }
        for (String kv : raw.split("&")) {
            int i = kv.indexOf('=');
            q.put(
                    java.net.URLDecoder.decode(i < 0 ? kv : kv.substring(0, i), StandardCharsets.UTF_8),
                    i < 0 ? "" : java.net.URLDecoder.decode(kv.substring(i + 1), StandardCharsets.UTF_8));
        }
        return q;
    }

    static Answer json(int status, JsonNode node) {
        try {
            return new Answer(status, FlinkJson.MAPPER.writeValueAsBytes(node));
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    static byte[] error(String message) {
        ObjectNode e = FlinkJson.MAPPER.createObjectNode();
        e.putArray("errors").add(message);
        return json(0, e).body;
    }

    private static void send(HttpExchange ex, Answer a) throws IOException {
        a.headers.forEach((k, v) -> ex.getResponseHeaders().set(k, v));
        if (a.body != null && !ex.getRequestMethod().equals("HEAD")) {
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(a.status, a.body.length);
            try (OutputStream out = ex.getResponseBody()) {
                out.write(a.body);
            }
        } else {
            ex.sendResponseHeaders(a.status, -1);
            ex.close();
        }
    }

    /** Sends the head and the body's first byte, then the rest once hung requests are released. */
    private void stall(HttpExchange ex, Answer a) throws IOException {
        a.headers.forEach((k, v) -> ex.getResponseHeaders().set(k, v));
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(a.status, a.body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(a.body, 0, 1);
            out.flush();
            awaitRelease();
            out.write(a.body, 1, a.body.length - 1);
        }
    }

    /** Serves the fake on 127.0.0.1:PORT until killed (for trying the plugin without jobstore). */
    public static void main(String[] args) throws Exception {
        FakeJobstore fake = new FakeJobstore(Integer.parseInt(args[0]));
        System.out.println("fake jobstore at " + fake.url());
        Thread.currentThread().join();
    }

    @Override
    public void close() {
        closed = true;
        releaseHung();
        ha.close();
        List<HttpServer> all;
        synchronized (servers) {
            all = new ArrayList<>(servers.values());
            servers.clear();
        }
        for (HttpServer s : all) {
            s.stop(0);
        }
        executor.shutdownNow();
    }
}
