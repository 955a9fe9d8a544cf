package io.jobstore.flink.ha;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A pass-through HTTP proxy between Flink and jobstore for the integration test, able to hold
 * mark-clean requests. It lets the test observe an entry while it is dirty, and stop jobstore at
 * the moment Flink marks a result clean (so that Flink's mark-clean really meets a stopped
 * jobstore).
 *
 * <p>Usage: {@code FaultProxy LISTEN_PORT UPSTREAM_URL}. Control (on the proxy's own port):
 *
 * <ul>
 *   <li>{@code POST /__proxy/hold-clean}: from now on, requests whose path ends in {@code /clean}
 *       wait (unanswered) until released;
 *   <li>{@code POST /__proxy/release}: let waiting and later mark-clean requests through;
 *   <li>{@code GET /__proxy/held}: how many mark-clean requests wait now, and how many waited in
 *       total ({@code {"waiting": n, "total": m}}).
 * </ul>
 *
 * An unreachable upstream is answered with 502, like a load balancer in front of a stopped
 * service.
 */
public final class FaultProxy {

    private final HttpClient http =
            HttpClient.newBuilder()
                    .version(HttpClient.Version.HTTP_1_1)
                    .connectTimeout(Duration.ofSeconds(5))
                    .build();
    private final String upstream;
    private final Object lock = new Object();
    private boolean holding;
    private final AtomicInteger waiting = new AtomicInteger();
    private final AtomicInteger total = new AtomicInteger();

    private FaultProxy(String upstream) {
        this.upstream = upstream.replaceAll("/+$", "");
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: FaultProxy LISTEN_PORT UPSTREAM_URL");
            System.exit(2);
        }
        FaultProxy proxy = new FaultProxy(args[1]);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])), 50);
        server.createContext("/", proxy::handle);
        server.setExecutor(Executors.newCachedThreadPool());
        server.start();
        System.out.println("proxy at http://127.0.0.1:" + server.getAddress().getPort() + " -> " + args[1]);
    }

    private void handle(HttpExchange ex) throws IOException {
        try {
            String path = ex.getRequestURI().getRawPath();
            if (path.startsWith("/__proxy/")) {
                control(ex, path.substring("/__proxy/".length()));
                return;
            }
            if (path.endsWith("/clean")) {
                awaitRelease();
            }
            forward(ex);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            reply(ex, 502, "{\"errors\":[\"proxy: interrupted\"]}");
        } catch (RuntimeException | IOException e) {
            reply(ex, 502, "{\"errors\":[\"proxy: " + e.getClass().getSimpleName() + "\"]}");
        }
    }

    private void awaitRelease() throws InterruptedException {
        synchronized (lock) {
            if (!holding) {
                return;
            }
            total.incrementAndGet();
            waiting.incrementAndGet();
            try {
                while (holding) {
                    lock.wait();
                }
            } finally {
                waiting.decrementAndGet();
            }
        }
    }

    private void control(HttpExchange ex, String command) throws IOException {
        ex.getRequestBody().readAllBytes();
        switch (command) {
            case "hold-clean":
                synchronized (lock) {
                    holding = true;
                    total.set(0);
                }
                reply(ex, 200, "{\"holding\":true}");
                return;
            case "release":
                synchronized (lock) {
                    holding = false;
                    lock.notifyAll();
                }
                reply(ex, 200, "{\"holding\":false}");
                return;
            case "held":
                reply(ex, 200, "{\"waiting\":" + waiting.get() + ",\"total\":" + total.get() + "}");
                return;
            default:
                reply(ex, 404, "{\"errors\":[\"proxy: unknown command\"]}");
        }
    }

    private void forward(HttpExchange ex) throws IOException, InterruptedException {
        byte[] body = ex.getRequestBody().readAllBytes();
        String query = ex.getRequestURI().getRawQuery();
        HttpRequest.Builder b =
                HttpRequest.newBuilder(URI.create(upstream + ex.getRequestURI().getRawPath() + (query == null ? "" : "?" + query)))
                        .timeout(Duration.ofSeconds(30))
                        .method(
                                ex.getRequestMethod(),
                                body.length == 0 ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(body));
        for (String h : new String[] {"Authorization", "Content-Type", "Accept", "User-Agent"}) {
            String v = ex.getRequestHeaders().getFirst(h);
            if (v != null) {
                b.header(h, v);
            }
        }
        HttpResponse<byte[]> r;
        try {
            r = http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
        } catch (IOException e) {
            reply(ex, 502, "{\"errors\":[\"proxy: jobstore unreachable\"]}");
            return;
        }
        r.headers().firstValue("Content-Type").ifPresent(v -> ex.getResponseHeaders().set("Content-Type", v));
        byte[] out = r.body() == null ? new byte[0] : r.body();
        if (ex.getRequestMethod().equals("HEAD") || out.length == 0) {
            ex.sendResponseHeaders(r.statusCode(), -1);
            ex.close();
        } else {
            ex.sendResponseHeaders(r.statusCode(), out.length);
            try (OutputStream os = ex.getResponseBody()) {
                os.write(out);
            }
        }
    }

    private static void reply(HttpExchange ex, int status, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        if (ex.getRequestMethod().equals("HEAD")) {
            ex.sendResponseHeaders(status, -1);
            ex.close();
            return;
        }
        ex.sendResponseHeaders(status, b.length);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(b);
        }
    }
}
