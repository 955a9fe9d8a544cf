package io.jobstore.flink.ha;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Just enough of a Kubernetes API server for Flink's Kubernetes HA services to be built in the
 * self-test: ConfigMap lists answer with an empty list, watches are accepted (a WebSocket upgrade
 * that then stays silent), everything else is 404. It records the request lines.
 */
final class FakeKubernetesApi implements AutoCloseable {

    private final ServerSocket server;
    private final List<String> requests = Collections.synchronizedList(new ArrayList<>());
    private final List<Socket> open = Collections.synchronizedList(new ArrayList<>());

    FakeKubernetesApi() throws IOException {
        server = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
        Thread t = new Thread(this::acceptLoop, "fake-kubernetes-api");
        t.setDaemon(true);
        t.start();
    }

    String url() {
        return "http://127.0.0.1:" + server.getLocalPort();
    }

    List<String> requests() {
        synchronized (requests) {
            return new ArrayList<>(requests);
        }
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                open.add(s);
                Thread t = new Thread(() -> serve(s), "fake-kubernetes-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket s) {
        try (Socket socket = s) {
            InputStream in = socket.getInputStream();
            OutputStream out = socket.getOutputStream();
            while (true) {
                String head = readHead(in);
                if (head == null) {
                    return;
                }
                String[] lines = head.split("\r\n");
                String requestLine = lines[0];
                Map<String, String> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
                for (int i = 1; i < lines.length; i++) {
                    int c = lines[i].indexOf(':');
                    if (c > 0) {
                        headers.put(lines[i].substring(0, c).trim(), lines[i].substring(c + 1).trim());
                    }
                }
                int length = Integer.parseInt(headers.getOrDefault("Content-Length", "0"));
                in.readNBytes(length);
                requests.add(requestLine);
                String[] parts = requestLine.split(" ");
                String target = parts.length > 1 ? parts[1] : "";
                if (headers.getOrDefault("Upgrade", "").toLowerCase(Locale.ROOT).equals("websocket")) {
                    String accept = Base64.getEncoder().encodeToString(MessageDigest.getInstance("SHA-1").digest(
                            (headers.get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
                                    .getBytes(StandardCharsets.US_ASCII)));
                    out.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            + "Sec-WebSocket-Accept: " + accept + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                    out.flush();
                    // A watch without events: keep the connection until the client closes it.
                    while (in.read() >= 0) {
                        // discard client frames (pings, close)
                    }
                    return;
                }
                if (parts[0].equals("GET") && target.contains("/configmaps") && !target.contains("watch=true")) {
                    respond(out, 200, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMapList\","
                            + "\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[]}");
                } else {
                    respond(out, 404, "{\"apiVersion\":\"v1\",\"kind\":\"Status\",\"status\":\"Failure\","
                            + "\"reason\":\"NotFound\",\"code\":404,\"message\":\"not in the fake\"}");
                }
            }
        } catch (Exception e) {
            // connection closed
        }
    }

    private static void respond(OutputStream out, int status, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        out.write(("HTTP/1.1 " + status + (status == 200 ? " OK" : " Not Found") + "\r\nContent-Type: application/json\r\n"
                + "Content-Length: " + b.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        out.write(b);
        out.flush();
    }

    private static String readHead(InputStream in) throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int state = 0;
        while (true) {
            int c = in.read();
            if (c < 0) {
                return null;
            }
            buf.write(c);
            state = (c == '\r' && (state == 0 || state == 2)) ? state + 1 : (c == '\n' && (state == 1 || state == 3)) ? state + 1 : 0;
            if (state == 4) {
                return buf.toString(StandardCharsets.ISO_8859_1.name());
            }
        }
    }

    @Override
    public void close() throws IOException {
        server.close();
        synchronized (open) {
            for (Socket s : open) {
                try {
                    s.close();
                } catch (IOException ignored) {
                    // closing
                }
            }
        }
    }
}
