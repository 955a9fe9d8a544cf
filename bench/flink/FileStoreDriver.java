/*
 * Flink's own FileSystemJobResultStore behind the two requests jobstore answers for a
 * JobManager's create+clean cycle, so that jobstore-bench drives both with the same clients
 * and the same payloads. Compiled and started by jobstore-bench (bench/src/flink.rs) with
 * javac/java against $FLINK_HOME/lib/*; not a server to run otherwise.
 *
 *   POST /v1/clusters/{cluster}/job-results          body: a Flink JobResultStore file
 *        -> createDirtyResultAsync: 201, 409 if the job has an entry, 400 if unreadable
 *   POST /v1/clusters/{cluster}/job-results/{id}/clean
 *        -> markResultAsCleanAsync: 200, 404 if the job has no entry
 *   GET  /readyz -> 200
 *
 * Each cluster has its own store in DIR/{cluster}, made by
 * FileSystemJobResultStore.fromConfiguration with job-result-store.storage-path set to it
 * and job-result-store.delete-on-commit false (a clean entry is kept, renamed, as jobstore
 * keeps it). The store's executor is the calling thread: the request's thread does the
 * store's work, with no hand-off to another pool. Requests are served by a fixed pool of
 * THREADS threads (Flink's REST server has rest.server.numThreads = 4).
 *
 * Usage: java -Dsun.net.httpserver.nodelay=true -cp "$FLINK_HOME/lib/*:CLASSES" \
 *            FileStoreDriver PORT_FILE DIR THREADS
 * (without TCP_NODELAY the JDK's server, which writes an answer's head and body separately,
 * waits for the client's delayed ACK on every answer).
 * It listens on a free 127.0.0.1 port and writes it to PORT_FILE.
 */

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.highavailability.FileSystemJobResultStore;
import org.apache.flink.runtime.highavailability.JobResultEntry;
import org.apache.flink.runtime.highavailability.JobResultStore;
import org.apache.flink.runtime.highavailability.JobResultStoreOptions;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.rest.messages.json.JobResultDeserializer;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.module.SimpleModule;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.NoSuchElementException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;

public final class FileStoreDriver {

    private static final String PREFIX = "/v1/clusters/";
    private static final String RESULTS = "/job-results";
    private static final String CLEAN = "/clean";
    private static final Executor SAME_THREAD = Runnable::run;

    private final File root;
    private final ObjectMapper mapper = new ObjectMapper();
    private final ConcurrentHashMap<String, JobResultStore> stores = new ConcurrentHashMap<>();

    private FileStoreDriver(File root) {
        this.root = root;
        mapper.registerModule(
                new SimpleModule().addDeserializer(JobResult.class, new JobResultDeserializer()));
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 3) {
            throw new IllegalArgumentException("usage: FileStoreDriver PORT_FILE DIR THREADS");
        }
        Path portFile = Paths.get(args[0]);
        FileStoreDriver driver = new FileStoreDriver(new File(args[1]));
        int threads = Integer.parseInt(args[2]);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 1024);
        server.setExecutor(Executors.newFixedThreadPool(threads));
        server.createContext("/", driver::handle);
        server.start();
        Path tmp = Paths.get(args[0] + ".tmp");
        Files.write(tmp, Integer.toString(server.getAddress().getPort()).getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, portFile, StandardCopyOption.ATOMIC_MOVE);
    }

    private void handle(HttpExchange exchange) throws IOException {
        try {
            route(exchange);
        } catch (RuntimeException | IOException e) {
            answer(exchange, 500, "{\"errors\":[\"" + e.getClass().getSimpleName() + "\"]}");
        } finally {
            exchange.close();
        }
    }

    private void route(HttpExchange exchange) throws IOException {
        String method = exchange.getRequestMethod();
        String path = exchange.getRequestURI().getPath();
        if (method.equals("GET") && path.equals("/readyz")) {
            answer(exchange, 200, "{\"status\":\"ready\"}");
            return;
        }
        if (!method.equals("POST") || !path.startsWith(PREFIX)) {
            answer(exchange, 404, "{\"errors\":[\"not found\"]}");
            return;
        }
        String rest = path.substring(PREFIX.length());
        int slash = rest.indexOf('/');
        if (slash <= 0) {
            answer(exchange, 404, "{\"errors\":[\"not found\"]}");
            return;
        }
        String cluster = rest.substring(0, slash);
        String tail = rest.substring(slash);
        if (tail.equals(RESULTS)) {
            create(exchange, cluster);
        } else if (tail.startsWith(RESULTS + "/") && tail.endsWith(CLEAN)) {
            String id = tail.substring(RESULTS.length() + 1, tail.length() - CLEAN.length());
            clean(exchange, cluster, id);
        } else {
            answer(exchange, 404, "{\"errors\":[\"not found\"]}");
        }
    }

    /** createDirtyResult with the file's {@code result}, as Flink's own deserializer reads it. */
    private void create(HttpExchange exchange, String cluster) throws IOException {
        JobResult result;
        try (InputStream in = exchange.getRequestBody()) {
            JsonNode file = mapper.readTree(in);
            JsonNode node = file == null ? null : file.get("result");
            if (node == null) {
                answer(exchange, 400, "{\"errors\":[\"no result\"]}");
                return;
            }
            result = mapper.treeToValue(node, JobResult.class);
        } catch (IOException | RuntimeException e) {
            answer(exchange, 400, "{\"errors\":[\"unreadable job result\"]}");
            return;
        }
        JobResultEntry entry = new JobResultEntry(result);
        if (completes(store(cluster).createDirtyResultAsync(entry), IllegalStateException.class)) {
            answer(exchange, 201, entry(result.getJobId(), "dirty"));
        } else {
            answer(exchange, 409, "{\"errors\":[\"the job has an entry\"]}");
        }
    }

    /** markResultAsClean. */
    private void clean(HttpExchange exchange, String cluster, String id) throws IOException {
        JobID job;
        try {
            job = JobID.fromHexString(id);
        } catch (IllegalArgumentException e) {
            answer(exchange, 400, "{\"errors\":[\"not a job id\"]}");
            return;
        }
        if (completes(store(cluster).markResultAsCleanAsync(job), NoSuchElementException.class)) {
            answer(exchange, 200, entry(job, "clean"));
        } else {
            answer(exchange, 404, "{\"errors\":[\"no entry for the job\"]}");
        }
    }

    /**
     * Waits for the store's future: true when it completed, false when it failed with the
     * {@code expected} kind of cause (Flink's "has an entry" or "has none"); any other
     * failure is thrown.
     */
    private static boolean completes(CompletableFuture<?> future, Class<? extends Exception> expected)
            throws IOException {
        try {
            future.get();
            return true;
        } catch (ExecutionException e) {
            if (expected.isInstance(e.getCause())) {
                return false;
            }
            throw new IOException(e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(e);
        }
    }

    // DELETE_ON_COMMIT is deprecated in Flink 2.3 but still what fromConfiguration reads.
    @SuppressWarnings("deprecation")
    private JobResultStore store(String cluster) {
        return stores.computeIfAbsent(cluster, c -> {
            Configuration conf = new Configuration();
            conf.set(JobResultStoreOptions.STORAGE_PATH, new File(root, c).toURI().toString());
            conf.set(JobResultStoreOptions.DELETE_ON_COMMIT, false);
            try {
                return FileSystemJobResultStore.fromConfiguration(conf, SAME_THREAD);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    private static String entry(JobID job, String state) {
        return "{\"job-id\":\"" + job + "\",\"state\":\"" + state + "\"}";
    }

    private static void answer(HttpExchange exchange, int status, String json) throws IOException {
        byte[] body = json.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "application/json");
        exchange.sendResponseHeaders(status, body.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(body);
        }
    }
}
