package io.jobstore.flink.ha;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * An in-memory stand-in for jobstore's result store API (the part of docs/api-contract the plugin
 * uses), with fault injection, for the plugin's self-test without a database.
 */
final class FakeJobstore implements AutoCloseable {

    /** What to do with the next matching request instead of (or after) serving it. */
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
        APPLY_THEN_DROP
    }

    static final class Request {
        final String method;
        final String path;
        final String authorization;

        Request(String method, String path, String authorization) {
            this.method = method;
            this.path = path;
            this.authorization = authorization;
        }

        @Override
        public String toString() {
            return method + " " + path;
        }
    }

    private static final Pattern ROUTE =
            Pattern.compile(
                    "^/v1/clusters/([A-Za-z0-9._-]{1,128})/(job-results|application-results)(?:/([0-9a-fA-F]{32})(/clean)?)?$");

    private final HttpServer server;
    /** cluster + "/" + collection -> id -> entry. */
    private final Map<String, TreeMap<String, ObjectNode>> data = new HashMap<>();
    private final Deque<Fault> faults = new ArrayDeque<>();
    private String faultMethod;
    private final List<Request> requests = Collections.synchronizedList(new ArrayList<>());
    private volatile String requiredToken;

    FakeJobstore() throws IOException {
        this(0);
    }

    FakeJobstore(int port) throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        server.createContext("/", this::handle);
        server.setExecutor(Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "fake-jobstore");
            t.setDaemon(true);
            return t;
        }));
        server.start();
    }

    String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    void requireToken(String token) {
        requiredToken = token;
    }

    /** Inject faults for the next requests with this method (in order). */
    synchronized void failNext(String method, Fault... next) {
        faultMethod = method;
        faults.clear();
        Collections.addAll(faults, next);
    }

    List<Request> requests() {
        synchronized (requests) {
            return new ArrayList<>(requests);
        }
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

    private synchronized Fault takeFault(String method) {
        if (method.equals(faultMethod) && !faults.isEmpty()) {
            return faults.poll();
        }
        return null;
    }

    private void handle(HttpExchange ex) throws IOException {
        try {
            String method = ex.getRequestMethod();
            URI uri = ex.getRequestURI();
            requests.add(new Request(method, uri.getRawPath() + (uri.getRawQuery() == null ? "" : "?" + uri.getRawQuery()),
                    ex.getRequestHeaders().getFirst("Authorization")));
            byte[] body = readAll(ex.getRequestBody());
            Fault fault = takeFault(method);
            if (fault == Fault.STATUS_429) {
                send(ex, 429, error("too many requests (injected)"));
                return;
            }
            if (fault == Fault.STATUS_503) {
                send(ex, 503, error("database unreachable"));
                return;
            }
            if (fault == Fault.DROP) {
                ex.close();
                return;
            }
            if (requiredToken != null
                    && !("Bearer " + requiredToken).equals(ex.getRequestHeaders().getFirst("Authorization"))) {
                send(ex, 401, error("missing or wrong token"));
                return;
            }
            Object[] answer = serve(method, uri, body);
            if (fault == Fault.APPLY_THEN_503) {
                send(ex, 503, error("database unreachable"));
                return;
            }
            if (fault == Fault.APPLY_THEN_DROP) {
                ex.close();
                return;
            }
            send(ex, (Integer) answer[0], (byte[]) answer[1]);
        } catch (RuntimeException e) {
            send(ex, 500, error("fake jobstore: " + e));
        }
    }

    private synchronized Object[] serve(String method, URI uri, byte[] body) throws IOException {
        Matcher m = ROUTE.matcher(uri.getRawPath());
        if (!m.matches()) {
            return new Object[] {404, error("no route")};
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
                return new Object[] {
                    409,
                    error((jobs ? "Job" : "Application") + " result store already contains an entry for "
                            + (jobs ? "job " : "application ") + newId)
                };
            }
            putRaw(cluster, collection, newId, "dirty", result);
            return new Object[] {201, json(store.get(newId))};
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
            return new Object[] {200, json(page)};
        }
        if (id != null && clean && method.equals("POST")) {
            ObjectNode e = store.get(id);
            if (e == null) {
                return new Object[] {
                    404,
                    error("Could not mark " + (jobs ? "job " : "application ") + id
                            + " as clean as it is not present in the job result store.")
                };
            }
            if (!"clean".equals(e.path("state").asText())) {
                e.put("state", "clean");
                e.put("cleaned-at", Instant.now().toString());
            }
            return new Object[] {200, json(e)};
        }
        if (id != null && !clean && (method.equals("GET") || method.equals("HEAD"))) {
            ObjectNode e = store.get(id);
            if (e == null) {
                return new Object[] {404, method.equals("HEAD") ? null : error("not found")};
            }
            return new Object[] {200, method.equals("HEAD") ? null : json(e)};
        }
        return new Object[] {405, error("method not allowed")};
    }

    private static Map<String, String> query(String raw) {
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

    private static byte[] json(JsonNode node) throws IOException {
        return FlinkJson.MAPPER.writeValueAsBytes(node);
    }

    private static byte[] error(String message) {
        try {
            ObjectNode e = FlinkJson.MAPPER.createObjectNode();
            e.putArray("errors").add(message);
            return FlinkJson.MAPPER.writeValueAsBytes(e);
        } catch (IOException ex) {
            throw new IllegalStateException(ex);
        }
    }

    private static byte[] readAll(InputStream in) throws IOException {
        return in.readAllBytes();
    }

    private static void send(HttpExchange ex, int status, byte[] body) throws IOException {
        boolean head = ex.getRequestMethod().equals("HEAD");
        if (body != null && !head) {
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(status, body.length);
            try (OutputStream out = ex.getResponseBody()) {
                out.write(body);
            }
        } else {
            ex.sendResponseHeaders(status, -1);
            ex.close();
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
        server.stop(0);
    }
}
