package io.jobstore.flink.ha;

import org.apache.flink.api.common.ApplicationID;
import org.apache.flink.api.common.ApplicationState;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.IllegalConfigurationException;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.runtime.highavailability.ApplicationResult;
import org.apache.flink.runtime.highavailability.ApplicationResultEntry;
import org.apache.flink.runtime.highavailability.HighAvailabilityServices;
import org.apache.flink.runtime.highavailability.JobResultEntry;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.util.AbstractID;
import org.apache.flink.util.OptionalFailure;
import org.apache.flink.util.SerializedThrowable;
import org.apache.flink.util.SerializedValue;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Collectors;

/**
 * Self-test of the plugin without a Flink cluster, in plain Java (no JUnit: the project builds
 * without Maven).
 *
 * <ul>
 *   <li>{@code PluginSelfTest --fake [RESOURCES_DIR]}: against an in-memory fake of jobstore's API
 *       with fault injection: Flink's ten JobResultStore contract cases for both stores, the
 *       HTTP error mapping and retries, paging, auth, configuration, JSON compatibility with
 *       files written by Flink 2.3.
 *   <li>{@code PluginSelfTest --url URL [--token T] [--read-token R]}: Flink's contract cases,
 *       paging, cluster isolation and (with R) the answer to a read-only token, against a real
 *       jobstore (fresh random cluster ids).
 * </ul>
 *
 * Prints one "ok"/"not ok" line per case and a final "N passed, M failed"; exit 1 on failure.
 */
public final class PluginSelfTest extends Harness {

    private final ExecutorService io = Executors.newFixedThreadPool(4);

    // ---------------------------------------------------------------------------------------
    // Store adapters: the ten contract cases run on both stores through Flink's public API.
    // ---------------------------------------------------------------------------------------

    /**
     * The job or the application result store through Flink's public (asynchronous) API, by hex
     * id. Both name their methods alike ({@code createDirtyResultAsync}, {@code
     * hasDirtyJobResultEntryAsync} / {@code hasDirtyApplicationResultEntryAsync}, ...), so one
     * adapter serves both.
     */
    static final class Store {
        private final Object store;
        /** "Job" or "Application". */
        private final String noun;
        private final Class<? extends AbstractID> idType;
        private final Function<String, Object> entryOf;

        Store(Object store, String noun, Class<? extends AbstractID> idType, Function<String, Object> entryOf) {
            this.store = store;
            this.noun = noun;
            this.idType = idType;
            this.entryOf = entryOf;
        }

        String newId() throws Exception {
            return idType.getConstructor().newInstance().toHexString();
        }

        void create(String id) throws Exception {
            call("createDirtyResultAsync", entryOf.apply(id));
        }

        void markClean(String id) throws Exception {
            call("markResultAsCleanAsync", id(id));
        }

        boolean has(String id) throws Exception {
            return (Boolean) call("has" + noun + "ResultEntryAsync", id(id));
        }

        boolean hasDirty(String id) throws Exception {
            return (Boolean) call("hasDirty" + noun + "ResultEntryAsync", id(id));
        }

        boolean hasClean(String id) throws Exception {
            return (Boolean) call("hasClean" + noun + "ResultEntryAsync", id(id));
        }

        Set<String> dirtyIds() throws Exception {
            Set<String> ids = new HashSet<>();
            for (Object result : (Set<?>) invoke(store, "getDirtyResults")) {
                ids.add(((AbstractID) invoke(result, "get" + noun + "Id")).toHexString());
            }
            return ids;
        }

        private Object id(String hex) throws Exception {
            return idType.getMethod("fromHexString", String.class).invoke(null, hex);
        }

        private Object call(String method, Object arg) throws Exception {
            return ((CompletableFuture<?>) invoke(store, method, arg)).get();
        }

        private static Object invoke(Object target, String method, Object... args) throws Exception {
            for (Method m : target.getClass().getMethods()) {
                if (m.getName().equals(method) && m.getParameterCount() == args.length) {
                    try {
                        return m.invoke(target, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
                    }
                }
            }
            throw new NoSuchMethodException(target.getClass().getName() + "." + method);
        }
    }

    static JobResult jobResult(JobID id, JobStatus status) {
        JobResult.Builder b =
                new JobResult.Builder()
                        .jobId(id)
                        .jobName("self-test " + id)
                        .jobStatus(status)
                        .netRuntime(1234)
                        .applicationId(new ApplicationID(id.getLowerPart(), id.getUpperPart()))
                        .startTime(1_700_000_000_000L)
                        .endTime(1_700_000_001_234L);
        if (status == JobStatus.FAILED) {
            b.serializedThrowable(new SerializedThrowable(new IllegalStateException("boom " + id)));
        }
        Map<String, SerializedValue<OptionalFailure<Object>>> acc = new HashMap<>();
        try {
            acc.put("records", new SerializedValue<>(OptionalFailure.of((Object) 42L)));
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        b.accumulatorResults(acc);
        return b.build();
    }

    static ApplicationResult applicationResult(ApplicationID id, ApplicationState state) {
        return new ApplicationResult.Builder()
                .applicationId(id)
                .applicationState(state)
                .applicationName("self-test app " + id)
                .startTime(1_700_000_000_000L)
                .endTime(1_700_000_001_234L)
                .build();
    }

    static Store jobStore(JobstoreJobResultStore s) {
        return new Store(s, "Job", JobID.class,
                id -> new JobResultEntry(jobResult(JobID.fromHexString(id), JobStatus.FINISHED)));
    }

    static Store applicationStore(JobstoreApplicationResultStore s) {
        return new Store(s, "Application", ApplicationID.class,
                id -> new ApplicationResultEntry(applicationResult(ApplicationID.fromHexString(id), ApplicationState.FINISHED)));
    }

    /** Flink's JobResultStoreContractTest, each case on a fresh (empty) cluster. */
    private void contract(String kind, Supplier<Store> fresh) {
        contractCase(kind, fresh, "1: create twice -> IllegalStateException", (s, id) -> {
            s.create(id);
            expect(IllegalStateException.class, () -> s.create(id));
        });
        contractCase(kind, fresh, "2: create, clean, create -> IllegalStateException", (s, id) -> {
            s.create(id);
            s.markClean(id);
            expect(IllegalStateException.class, () -> s.create(id));
        });
        contractCase(kind, fresh, "3: mark clean twice -> no error", (s, id) -> {
            s.create(id);
            s.markClean(id);
            s.markClean(id);
            check(s.hasClean(id), "clean after second mark");
        });
        contractCase(kind, fresh, "4: mark clean on an empty store -> NoSuchElementException", (s, id) -> {
            NoSuchElementException e = expect(NoSuchElementException.class, () -> s.markClean(id));
            check(e.getMessage().contains("Could not mark") && e.getMessage().contains(id), "message: " + e.getMessage());
        });
        contractCase(kind, fresh, "5: dirty entry -> hasDirty, !hasClean, has", (s, id) -> {
            s.create(id);
            check(s.hasDirty(id), "hasDirty");
            check(!s.hasClean(id), "!hasClean");
            check(s.has(id), "has");
        });
        contractCase(kind, fresh, "6: clean entry -> !hasDirty, hasClean, has", (s, id) -> {
            s.create(id);
            s.markClean(id);
            check(!s.hasDirty(id), "!hasDirty");
            check(s.hasClean(id), "hasClean");
            check(s.has(id), "has");
        });
        contractCase(kind, fresh, "7: empty store -> all false", (s, id) -> {
            check(!s.hasDirty(id) && !s.hasClean(id) && !s.has(id), "all false");
        });
        test(kind + " contract 8: getDirtyResults on an empty store -> empty", () -> {
            checkEq(Collections.emptySet(), fresh.get().dirtyIds(), "dirty ids");
        });
        contractCase(kind, fresh, "9: one dirty entry -> getDirtyResults returns it", (s, id) -> {
            s.create(id);
            checkEq(Collections.singleton(id), s.dirtyIds(), "dirty ids");
        });
        test(kind + " contract 10: A clean + B dirty -> getDirtyResults returns only B", () -> {
            Store s = fresh.get();
            String a = s.newId();
            String b = s.newId();
            s.create(a);
            s.markClean(a);
            s.create(b);
            checkEq(Collections.singleton(b), s.dirtyIds(), "dirty ids");
        });
    }

    interface ContractCase {
        void run(Store store, String newId) throws Exception;
    }

    /** One case on a fresh (empty) store, with a new id. */
    private void contractCase(String kind, Supplier<Store> fresh, String name, ContractCase c) {
        test(kind + " contract " + name, () -> {
            Store s = fresh.get();
            c.run(s, s.newId());
        });
    }

    // ---------------------------------------------------------------------------------------

    private JobstoreClient client(String url, String cluster, int retries, int pageSize, String token) {
        return new JobstoreClient(
                url, cluster, token, Duration.ofSeconds(5), retries, Duration.ofMillis(10), Duration.ofMillis(50), pageSize);
    }

    private JobstoreJobResultStore jobResults(String url, String cluster, int retries, int pageSize, String token) {
        return new JobstoreJobResultStore(client(url, cluster, retries, pageSize, token), io);
    }

    /** Creates the dirty result of job {@code id} with that status (the store's synchronous call). */
    private static void createDirty(JobstoreJobResultStore s, JobID id, JobStatus status) throws IOException {
        s.createDirtyResultInternal(new JobResultEntry(jobResult(id, status)));
    }

    /** Creates the dirty result of a new job with that status: its id. */
    private static JobID createDirty(JobstoreJobResultStore s, JobStatus status) throws IOException {
        JobID id = new JobID();
        createDirty(s, id, status);
        return id;
    }

    /** A FAILED result (with its failure cause) as sent, as stored, and as Flink reads it back. */
    static final class RoundTrip {
        JobResult in;
        JsonNode stored;
        JobResult out;
    }

    private RoundTrip failedRoundTrip(String url, String token) throws Exception {
        JobstoreClient c = client(url, randomCluster(), 2, 1000, token);
        JobstoreJobResultStore s = new JobstoreJobResultStore(c, io);
        RoundTrip rt = new RoundTrip();
        rt.in = jobResult(new JobID(), JobStatus.FAILED);
        s.createDirtyResultAsync(new JobResultEntry(rt.in)).get();
        rt.stored = new ResultStoreApi(c).get(ResultStoreApi.Kind.JOB, rt.in.getJobId().toHexString()).get("result");
        rt.out = s.getDirtyResults().iterator().next();
        return rt;
    }

    private static String randomCluster() {
        return "selftest-" + UUID.randomUUID().toString().substring(0, 8);
    }

    private void runAgainstFake(Path resources) throws Exception {
        try (FakeJobstore fake = new FakeJobstore()) {
            String url = fake.url();
            contract("job", () -> jobStore(new JobstoreJobResultStore(client(url, randomCluster(), 2, 1000, null), io)));
            contract("application", () -> applicationStore(
                    new JobstoreApplicationResultStore(client(url, randomCluster(), 2, 1000, null), io)));

            test("application: getCleanApplicationResult is null when absent or dirty, the result when clean", () -> {
                JobstoreApplicationResultStore s = new JobstoreApplicationResultStore(client(url, randomCluster(), 2, 1000, null), io);
                ApplicationID id = new ApplicationID();
                check(s.getCleanApplicationResultAsync(id).get() == null, "absent -> null");
                s.createDirtyResultAsync(new ApplicationResultEntry(applicationResult(id, ApplicationState.FAILED))).get();
                check(s.getCleanApplicationResultAsync(id).get() == null, "dirty -> null");
                s.markResultAsCleanAsync(id).get();
                ApplicationResult r = s.getCleanApplicationResultAsync(id).get();
                checkEq(id, r.getApplicationId(), "id");
                checkEq(ApplicationState.FAILED, r.getApplicationState(), "state");
                checkEq("self-test app " + id, r.getApplicationName(), "name");
            });

            test("job: stored JSON is Flink's JobResult JSON and reads back equal (with failure cause)", () -> {
                RoundTrip rt = failedRoundTrip(url, null);
                JobID id = rt.in.getJobId();
                JobResult in = rt.in;
                JsonNode r = rt.stored;
                checkEq(id.toHexString(), r.get("id").asText(), "id");
                checkEq("FAILED", r.get("application-status").asText(), "application-status");
                checkEq(1234L, r.get("net-runtime").asLong(), "net-runtime");
                checkEq(IllegalStateException.class.getName(), r.get("failure-cause").get("class").asText(), "failure class");
                check(r.get("accumulator-results").has("records"), "accumulator");
                JobResult out = rt.out;
                checkEq(in.getJobId(), out.getJobId(), "job id");
                checkEq(in.getJobName(), out.getJobName(), "name");
                checkEq(in.getJobStatus(), out.getJobStatus(), "status");
                checkEq(in.getNetRuntime(), out.getNetRuntime(), "net runtime");
                checkEq(in.getApplicationId(), out.getApplicationId(), "application id");
                checkEq(in.getStartTime(), out.getStartTime(), "start");
                checkEq(in.getEndTime(), out.getEndTime(), "end");
                check(out.getSerializedThrowable().get().getFullStringifiedStackTrace().contains("boom " + id), "stack trace");
                checkEq(in.getAccumulatorResults().keySet(), out.getAccumulatorResults().keySet(), "accumulators");
            });

            if (resources != null) {
                test("JSON: files written by Flink 2.3's file stores read and re-serialize identically", () -> {
                    int n = 0;
                    for (String dir : new String[] {"job-result-store", "application-result-store"}) {
                        try (DirectoryStream<Path> files = Files.newDirectoryStream(resources.resolve(dir), "*.json")) {
                            for (Path f : files) {
                                JsonNode file = FlinkJson.parse(Files.readAllBytes(f));
                                JsonNode result = file.get("result");
                                byte[] again = dir.startsWith("job")
                                        ? FlinkJson.envelope(FlinkJson.jobResult(result))
                                        : FlinkJson.envelope(FlinkJson.applicationResult(result));
                                check(FlinkJson.sameJson(file, FlinkJson.parse(again)), f + " differs after a round trip:\n"
                                        + new String(again, StandardCharsets.UTF_8));
                                n++;
                            }
                        }
                    }
                    check(n >= 2, "found " + n + " files under " + resources);
                });
            }

            test("create: 409 on the first attempt -> IllegalStateException, no retry", () -> {
                JobstoreJobResultStore s = jobResults(url, randomCluster(), 3, 1000, null);
                JobID id = createDirty(s, JobStatus.FINISHED);
                fake.clearRequests();
                IllegalStateException e = expect(IllegalStateException.class,
                        () -> createDirty(s, id, JobStatus.FINISHED));
                check(e.getMessage().contains(id.toHexString()), "message names the job: " + e.getMessage());
                checkEq(1, fake.requests().size(), "requests");
            });

            for (FakeJobstore.Fault fault : new FakeJobstore.Fault[] {FakeJobstore.Fault.APPLY_THEN_503, FakeJobstore.Fault.APPLY_THEN_DROP}) {
                test("create: first attempt applied but answer lost (" + fault + "), retry meets 409 of our own entry -> success", () -> {
                    JobstoreClient c = client(url, randomCluster(), 3, 1000, null);
                    JobstoreJobResultStore s = new JobstoreJobResultStore(c, io);
                    JobID id = new JobID();
                    fake.failNext("POST", fault);
                    createDirty(s, id, JobStatus.FINISHED);
                    fake.failNext("POST");
                    checkEq("dirty", new ResultStoreApi(c).get(ResultStoreApi.Kind.JOB, id.toHexString()).get("state").asText(), "state");
                });
            }

            test("create: 409 after a lost answer but the stored entry differs -> IllegalStateException", () -> {
                JobstoreJobResultStore s = jobResults(url, randomCluster(), 3, 1000, null);
                JobID id = createDirty(s, JobStatus.CANCELED);
                fake.failNext("POST", FakeJobstore.Fault.STATUS_503);
                expect(IllegalStateException.class,
                        () -> createDirty(s, id, JobStatus.FINISHED));
                fake.failNext("POST");
            });

            test("create: 409 after a lost answer but the stored entry is clean -> IllegalStateException", () -> {
                JobstoreJobResultStore s = jobResults(url, randomCluster(), 3, 1000, null);
                JobID id = createDirty(s, JobStatus.FINISHED);
                s.markResultAsCleanInternal(id);
                fake.failNext("POST", FakeJobstore.Fault.APPLY_THEN_DROP);
                expect(IllegalStateException.class, () -> createDirty(s, id, JobStatus.FINISHED));
                fake.failNext("POST");
            });

            test("GET: two 503 answers are retried, the third attempt answers", () -> {
                JobstoreJobResultStore s = jobResults(url, randomCluster(), 2, 1000, null);
                JobID id = createDirty(s, JobStatus.FINISHED);
                fake.clearRequests();
                fake.failNext("GET", FakeJobstore.Fault.STATUS_503, FakeJobstore.Fault.DROP);
                check(s.hasDirtyJobResultEntryInternal(id), "hasDirty after retries");
                checkEq(3, fake.requests().size(), "attempts");
            });

            test("GET: 503 on every attempt -> IOException after 1 + retries attempts", () -> {
                JobstoreJobResultStore s = jobResults(url, randomCluster(), 2, 1000, null);
                fake.clearRequests();
                fake.failNext("GET", FakeJobstore.Fault.STATUS_503, FakeJobstore.Fault.STATUS_503, FakeJobstore.Fault.STATUS_503);
                IOException e = expect(IOException.class, () -> s.hasDirtyJobResultEntryInternal(new JobID()));
                check(e.getMessage().contains("503") && e.getMessage().contains("3 attempt"), "message: " + e.getMessage());
                checkEq(3, fake.requests().size(), "attempts");
            });

            test("network: connection refused -> IOException through Flink's async API", () -> {
                int port;
                try (ServerSocket ss = new ServerSocket(0)) {
                    port = ss.getLocalPort();
                }
                JobstoreJobResultStore s = jobResults("http://127.0.0.1:" + port, "x", 2, 1000, null);
                expect(IOException.class, () -> s.hasDirtyJobResultEntryAsync(new JobID()).get());
                expect(IOException.class, () -> s.getDirtyResults());
                expect(IOException.class, () -> s.createDirtyResultAsync(new JobResultEntry(jobResult(new JobID(), JobStatus.FINISHED))).get());
                expect(IOException.class, () -> s.markResultAsCleanAsync(new JobID()).get());
            });

            test("auth: token sent as Bearer; 401 is not retried and is an IOException", () -> {
                fake.requireToken("s3cret");
                try {
                    String cluster = randomCluster();
                    JobstoreJobResultStore ok = jobResults(url, cluster, 2, 1000, "s3cret");
                    JobID id = createDirty(ok, JobStatus.FINISHED);
                    check(ok.hasDirtyJobResultEntryInternal(id), "visible with token");
                    checkEq("Bearer s3cret", fake.requests().get(fake.requests().size() - 1).authorization, "header");
                    JobstoreJobResultStore bad = jobResults(url, cluster, 2, 1000, null);
                    fake.clearRequests();
                    IOException e = expect(IOException.class, () -> bad.hasDirtyJobResultEntryInternal(id));
                    check(e.getMessage().contains("401") && e.getMessage().contains("token"), "message: " + e.getMessage());
                    checkEq(1, fake.requests().size(), "attempts");
                } finally {
                    fake.requireToken(null);
                }
            });

            test("mark clean: retried after a dropped connection; absent -> NoSuchElementException with Flink's message", () -> {
                JobstoreJobResultStore s = jobResults(url, randomCluster(), 2, 1000, null);
                JobID id = createDirty(s, JobStatus.FINISHED);
                fake.failNext("POST", FakeJobstore.Fault.APPLY_THEN_DROP);
                s.markResultAsCleanAsync(id).get();
                fake.failNext("POST");
                check(s.hasCleanJobResultEntryInternal(id), "clean");
                JobID absent = new JobID();
                NoSuchElementException e = expect(NoSuchElementException.class, () -> s.markResultAsCleanAsync(absent).get());
                checkEq("Could not mark job " + absent + " as clean as it is not present in the job result store.",
                        e.getMessage(), "message");
            });

            test("getDirtyResults: pages with limit and after until next is null", () -> {
                JobstoreJobResultStore s = jobResults(url, randomCluster(), 2, 2, null);
                Set<String> dirty = new HashSet<>();
                for (int i = 0; i < 7; i++) {
                    JobID id = createDirty(s, JobStatus.FINISHED);
                    if (i % 3 == 0) {
                        s.markResultAsCleanInternal(id);
                    } else {
                        dirty.add(id.toHexString());
                    }
                }
                fake.clearRequests();
                Set<String> got = s.getDirtyResults().stream().map(r -> r.getJobId().toHexString()).collect(Collectors.toSet());
                checkEq(dirty, got, "dirty ids");
                List<String> lists = new ArrayList<>();
                for (FakeJobstore.Request r : fake.requests()) {
                    lists.add(r.path);
                }
                check(lists.size() >= 2, "at least 2 pages (4 dirty, limit 2): " + lists);
                check(lists.get(0).endsWith("?state=dirty&limit=2"), "first page: " + lists.get(0));
                for (String page : lists.subList(1, lists.size())) {
                    check(page.contains("?state=dirty&limit=2&after="), "next page: " + page);
                }
            });

            test("getDirtyResults: an unreadable entry is skipped, the others are recovered", () -> {
                String cluster = randomCluster();
                JobstoreJobResultStore s = jobResults(url, cluster, 2, 1000, null);
                JobID good = createDirty(s, JobStatus.FINISHED);
                String bad = new JobID().toHexString();
                fake.putRaw(cluster, "job-results", bad, "dirty",
                        FlinkJson.parse(("{\"id\":\"" + bad + "\",\"application-status\":\"NOT-A-STATUS\"}").getBytes(StandardCharsets.UTF_8)));
                Set<String> got = s.getDirtyResults().stream().map(r -> r.getJobId().toHexString()).collect(Collectors.toSet());
                checkEq(Collections.singleton(good.toHexString()), got, "recovered");
            });

            test("isolation: two cluster ids do not see each other's entries", () -> {
                String a = randomCluster();
                String b = randomCluster();
                JobstoreJobResultStore sa = jobResults(url, a, 2, 1000, null);
                JobstoreJobResultStore sb = jobResults(url, b, 2, 1000, null);
                JobID id = new JobID();
                sa.createDirtyResultAsync(new JobResultEntry(jobResult(id, JobStatus.FINISHED))).get();
                check(!sb.hasJobResultEntryAsync(id).get(), "b does not see a's entry");
                check(sb.getDirtyResults().isEmpty(), "b has no dirty results");
                expect(NoSuchElementException.class, () -> sb.markResultAsCleanAsync(id).get());
                sb.createDirtyResultAsync(new JobResultEntry(jobResult(id, JobStatus.FAILED))).get();
                checkEq(1, sa.getDirtyResults().size(), "a still has its one entry");
            });

            new ModeSelfTest(this, io).run(fake);
            new HaSelfTest(this).runAgainstFake(fake);
        }

        test("config: cluster id from high-availability.cluster-id, leading slashes dropped", () -> {
            Configuration c = new Configuration();
            checkEq("default", JobstoreClientConfig.clusterId(c), "Flink's default /default");
            c.set(HighAvailabilityOptions.HA_CLUSTER_ID, "/prod-eu.1");
            checkEq("prod-eu.1", JobstoreClientConfig.clusterId(c), "with slash");
            c.set(HighAvailabilityOptions.HA_CLUSTER_ID, "a/b");
            expect(IllegalConfigurationException.class, () -> JobstoreClientConfig.clusterId(c));
        });

        test("config: jobstore.url required and validated; token-file read; bad retries rejected", () -> {
            Configuration c = new Configuration();
            expect(IllegalConfigurationException.class, () -> JobstoreClientConfig.client(c));
            c.set(JobstoreOptions.URL, "ftp://x");
            expect(IllegalConfigurationException.class, () -> JobstoreClientConfig.client(c));
            c.set(JobstoreOptions.URL, "http://127.0.0.1:1/prefix/");
            checkEq("http://127.0.0.1:1/prefix", JobstoreClientConfig.client(c).baseUrl(), "trailing slash dropped");
            Path tokenFile = Files.createTempFile("jobstore-token", ".txt");
            try {
                Files.write(tokenFile, "from-file\n".getBytes(StandardCharsets.UTF_8));
                c.set(JobstoreOptions.TOKEN_FILE, tokenFile.toString());
                JobstoreClientConfig.client(c);
                c.set(JobstoreOptions.TOKEN_FILE, tokenFile + ".missing");
                expect(IllegalConfigurationException.class, () -> JobstoreClientConfig.client(c));
                c.set(JobstoreOptions.TOKEN, "given");
                JobstoreClientConfig.client(c);
            } finally {
                Files.deleteIfExists(tokenFile);
            }
            c.set(JobstoreOptions.RETRIES, -1);
            expect(IllegalConfigurationException.class, () -> JobstoreClientConfig.client(c));
        });

        test("factory: standalone addresses like high-availability.type NONE, jobstore stores", () -> {
            Configuration c = new Configuration();
            c.set(JobstoreOptions.URL, "http://127.0.0.1:1");
            c.set(JobManagerOptions.ADDRESS, "127.0.0.1");
            c.set(JobManagerOptions.PORT, 6123);
            c.set(RestOptions.ADDRESS, "127.0.0.1");
            c.set(RestOptions.PORT, 8081);
            try (HighAvailabilityServices ha = new JobstoreHaServicesFactory().createHAServices(c, io)) {
                check(ha instanceof JobstoreHaServices, "type " + ha.getClass());
                check(ha.getJobResultStore() instanceof JobstoreJobResultStore, "job result store");
                check(ha.getApplicationResultStore() instanceof JobstoreApplicationResultStore, "application result store");
                check(ha.getJobResultStore() == ha.getJobResultStore(), "one job result store");
                checkEq("default", ((JobstoreHaServices) ha).client().clusterId(), "cluster id");
            }
            try (org.apache.flink.runtime.highavailability.ClientHighAvailabilityServices client =
                    new JobstoreHaServicesFactory().createClientHAServices(c)) {
                check(client.getClusterRestEndpointLeaderRetriever() != null, "client leader retriever");
            }
        });
    }

    private void runAgainstJobstore(String url, String token, String readToken) {
        contract("job (jobstore)", () -> jobStore(new JobstoreJobResultStore(client(url, randomCluster(), 2, 1000, token), io)));
        contract("application (jobstore)", () -> applicationStore(
                new JobstoreApplicationResultStore(client(url, randomCluster(), 2, 1000, token), io)));

        test("jobstore: getDirtyResults pages (limit 2) through 5 dirty of 8 entries", () -> {
            String cluster = randomCluster();
            JobstoreJobResultStore s = jobResults(url, cluster, 2, 2, token);
            Set<String> dirty = new HashSet<>();
            for (int i = 0; i < 8; i++) {
                JobID id = new JobID();
                s.createDirtyResultAsync(new JobResultEntry(jobResult(id, JobStatus.FINISHED))).get();
                if (i % 3 == 0) {
                    s.markResultAsCleanAsync(id).get();
                } else {
                    dirty.add(id.toHexString());
                }
            }
            Set<String> got = s.getDirtyResults().stream().map(r -> r.getJobId().toHexString()).collect(Collectors.toSet());
            checkEq(dirty, got, "dirty ids");
        });

        test("jobstore: a FAILED result with its failure cause reads back equal", () -> {
            RoundTrip rt = failedRoundTrip(url, token);
            checkEq(rt.in.getJobStatus(), rt.out.getJobStatus(), "status");
            checkEq(rt.in.getSerializedThrowable().get().getFullStringifiedStackTrace(),
                    rt.out.getSerializedThrowable().get().getFullStringifiedStackTrace(), "stack trace");
            JsonNode sent = FlinkJson.parse(FlinkJson.envelope(rt.in)).get("result");
            check(FlinkJson.sameJson(sent, rt.stored), "stored result equals the sent one");
        });

        if (readToken != null) {
            test("jobstore: a read-only token cannot create (IOException naming 403, no retry), reads work", () -> {
                String cluster = randomCluster();
                JobstoreJobResultStore ro = jobResults(url, cluster, 2, 1000, readToken);
                long t0 = System.nanoTime();
                IOException e = expect(IOException.class,
                        () -> ro.createDirtyResultInternal(new JobResultEntry(jobResult(new JobID(), JobStatus.FINISHED))));
                check(e.getMessage().contains("403"), "message: " + e.getMessage());
                check(e.getMessage().contains("answered HTTP 403"), "not retried: " + e.getMessage());
                check(System.nanoTime() - t0 < 5_000_000_000L, "fast");
                check(ro.getDirtyResults().isEmpty(), "read works");
                JobstoreJobResultStore none = jobResults(url, cluster, 2, 1000, null);
                IOException e2 = expect(IOException.class, () -> none.getDirtyResults());
                check(e2.getMessage().contains("answered HTTP 401"), "no token: " + e2.getMessage());
            });
        }

        test("jobstore: two cluster ids do not see each other's entries", () -> {
            JobstoreJobResultStore sa = new JobstoreJobResultStore(client(url, randomCluster(), 2, 1000, token), io);
            JobstoreJobResultStore sb = new JobstoreJobResultStore(client(url, randomCluster(), 2, 1000, token), io);
            JobID id = new JobID();
            sa.createDirtyResultAsync(new JobResultEntry(jobResult(id, JobStatus.FINISHED))).get();
            check(!sb.hasJobResultEntryAsync(id).get(), "b does not see a's entry");
            check(sb.getDirtyResults().isEmpty(), "b has no dirty results");
            expect(NoSuchElementException.class, () -> sb.markResultAsCleanAsync(id).get());
        });
    }

    ExecutorService io() {
        return io;
    }

    /** Runs the cases, shuts the executor down, prints "N passed, M failed" and exits (1 on a failure). */
    void runThenExit(Body cases) throws Exception {
        try {
            cases.run();
        } finally {
            io.shutdownNow();
            io.awaitTermination(5, TimeUnit.SECONDS);
        }
        exit();
    }

    public static void main(String[] args) throws Exception {
        PluginSelfTest t = new PluginSelfTest();
        if (args.length >= 1 && args[0].equals("--fake")) {
            Path resources = args.length >= 2 ? Paths.get(args[1]) : null;
            t.runThenExit(() -> t.runAgainstFake(resources));
        } else if (args.length >= 2 && args[0].equals("--url")) {
            String token = null;
            String readToken = null;
            for (int i = 2; i + 1 < args.length; i += 2) {
                if (args[i].equals("--token")) {
                    token = args[i + 1];
                } else if (args[i].equals("--read-token")) {
                    readToken = args[i + 1];
                }
            }
            String write = token;
            String read = readToken;
            t.runThenExit(() -> t.runAgainstJobstore(args[1], write, read));
        } else {
            System.err.println("usage: PluginSelfTest --fake [RESOURCES_DIR] | --url URL [--token T] [--read-token R]");
            System.exit(2);
        }
    }
}
