package io.jobstore.flink.ha;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.IllegalConfigurationException;
import org.apache.flink.runtime.highavailability.ClientHighAvailabilityServices;
import org.apache.flink.runtime.highavailability.HighAvailabilityServices;
import org.apache.flink.runtime.highavailability.JobResultEntry;
import org.apache.flink.runtime.jobmaster.JobResult;

import java.io.IOException;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Proxy;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.stream.Stream;

/**
 * Self-test cases of jobstore.ha.mode (the wrapper of Flink's own HA services, the Kubernetes
 * services, the mode setting) and of jobstore.url with several replicas. Run by {@link
 * PluginSelfTest} against the fake.
 */
final class ModeSelfTest {

    /** One call seen by the recording delegate. */
    static final class Call {
        final String method;
        final List<Object> args;

        Call(Method m, Object[] args) {
            this.method = signature(m);
            this.args = args == null ? Collections.emptyList() : Arrays.asList(args);
        }
    }

    static String signature(Method m) {
        StringBuilder b = new StringBuilder(m.getName()).append('(');
        for (int i = 0; i < m.getParameterCount(); i++) {
            b.append(i == 0 ? "" : ",").append(m.getParameterTypes()[i].getSimpleName());
        }
        return b.append(')').toString();
    }

    /** A value of the given type that the delegate returns and the wrapper must pass on. */
    static Object sentinel(Class<?> type) {
        if (type == void.class) {
            return null;
        }
        if (type == boolean.class) {
            return false;
        }
        if (type == CompletableFuture.class) {
            return new CompletableFuture<Void>();
        }
        if (type.isInterface()) {
            return Proxy.newProxyInstance(
                    type.getClassLoader(),
                    new Class<?>[] {type},
                    (p, m, a) -> {
                        if (m.getName().equals("toString")) {
                            return "sentinel " + type.getSimpleName();
                        }
                        if (m.getName().equals("hashCode")) {
                            return System.identityHashCode(p);
                        }
                        if (m.getName().equals("equals")) {
                            return p == a[0];
                        }
                        throw new UnsupportedOperationException("sentinel");
                    });
        }
        throw new IllegalArgumentException("no sentinel for " + type);
    }

    static Object argument(Class<?> type) {
        if (type == JobID.class) {
            return new JobID();
        }
        if (type == String.class) {
            return "some-address";
        }
        if (type == boolean.class) {
            return true;
        }
        if (type == Executor.class) {
            return (Executor) Runnable::run;
        }
        throw new IllegalArgumentException("no argument for " + type);
    }

    /** Every public abstract or default method of HighAvailabilityServices (inherited ones too). */
    static List<Method> serviceMethods() {
        List<Method> methods = new ArrayList<>();
        for (Method m : HighAvailabilityServices.class.getMethods()) {
            if (!Modifier.isStatic(m.getModifiers())) {
                methods.add(m);
            }
        }
        methods.sort(Comparator.comparing(ModeSelfTest::signature));
        return methods;
    }

    private final PluginSelfTest t;
    private final ExecutorService io;

    ModeSelfTest(PluginSelfTest t, ExecutorService io) {
        this.t = t;
        this.io = io;
    }

    private static JobstoreClient client(String urls, long backoffMillis, int retries) {
        return new JobstoreClient(
                urls,
                "selftest-" + UUID.randomUUID().toString().substring(0, 8),
                null,
                Duration.ofSeconds(5),
                retries,
                Duration.ofMillis(backoffMillis),
                Duration.ofMillis(backoffMillis * 4),
                1000);
    }

    private static String closedPortUrl() throws IOException {
        try (ServerSocket ss = new ServerSocket(0)) {
            return "http://127.0.0.1:" + ss.getLocalPort();
        }
    }

    private static JobResult finished(JobID id) {
        return PluginSelfTest.jobResult(id, JobStatus.FINISHED);
    }

    void run(FakeJobstore fake) throws Exception {
        t.test("wrapper: every HighAvailabilityServices method but the two result stores is forwarded (defaults included), with its arguments and answer", () -> {
            List<Call> calls = Collections.synchronizedList(new ArrayList<>());
            List<Object> answers = Collections.synchronizedList(new ArrayList<>());
            InvocationHandler recorder = (proxy, m, args) -> {
                if (m.getDeclaringClass() == Object.class) {
                    return m.getName().equals("toString") ? "recording delegate" : m.invoke(this, args);
                }
                calls.add(new Call(m, args));
                Object answer = sentinel(m.getReturnType());
                answers.add(answer);
                return answer;
            };
            HighAvailabilityServices delegate = (HighAvailabilityServices) Proxy.newProxyInstance(
                    HighAvailabilityServices.class.getClassLoader(), new Class<?>[] {HighAvailabilityServices.class}, recorder);
            HighAvailabilityServices wrapper =
                    JobstoreResultStoresHaServices.wrap(delegate, client(fake.url(), 10, 0), io);
            List<String> forwarded = new ArrayList<>();
            for (Method m : serviceMethods()) {
                String sig = signature(m);
                Object[] args = Arrays.stream(m.getParameterTypes()).map(ModeSelfTest::argument).toArray();
                calls.clear();
                answers.clear();
                Object got = m.invoke(wrapper, args);
                if (sig.equals("getJobResultStore()")) {
                    PluginSelfTest.check(got instanceof JobstoreJobResultStore, sig + " answered " + got);
                    PluginSelfTest.check(calls.isEmpty(), sig + " reached the delegate");
                    continue;
                }
                if (sig.equals("getApplicationResultStore()")) {
                    PluginSelfTest.check(got instanceof JobstoreApplicationResultStore, sig + " answered " + got);
                    PluginSelfTest.check(calls.isEmpty(), sig + " reached the delegate");
                    continue;
                }
                PluginSelfTest.checkEq(1, calls.size(), sig + ": calls on the delegate " + callNames(calls));
                PluginSelfTest.checkEq(sig, calls.get(0).method, "method the delegate got");
                PluginSelfTest.checkEq(Arrays.asList(args), calls.get(0).args, sig + " arguments");
                if (m.getReturnType() != void.class) {
                    PluginSelfTest.check(got == answers.get(0), sig + " did not return the delegate's answer: " + got);
                }
                forwarded.add(sig);
            }
            PluginSelfTest.check(forwarded.contains("closeWithOptionalClean(boolean)")
                    && forwarded.contains("globalCleanupAsync(JobID,Executor)")
                    && forwarded.contains("cleanupAllData()")
                    && forwarded.contains("getClusterRestEndpointLeaderElection()")
                    && forwarded.contains("getClusterRestEndpointLeaderRetriever()"),
                    "default methods covered: " + forwarded);
            System.out.println("# forwarded: " + String.join(" ", forwarded));
        });

        t.test("mode: default standalone; zookeeper and jobstore read case-insensitively; unknown rejected", () -> {
            Configuration c = new Configuration();
            PluginSelfTest.checkEq(JobstoreHaServicesFactory.Mode.STANDALONE,
                    JobstoreHaServicesFactory.Mode.fromConfiguration(c), "default");
            c.set(JobstoreOptions.MODE, " ZooKeeper ");
            PluginSelfTest.checkEq(JobstoreHaServicesFactory.Mode.ZOOKEEPER,
                    JobstoreHaServicesFactory.Mode.fromConfiguration(c), "zookeeper");
            c.set(JobstoreOptions.MODE, "JobStore");
            PluginSelfTest.checkEq(JobstoreHaServicesFactory.Mode.JOBSTORE,
                    JobstoreHaServicesFactory.Mode.fromConfiguration(c), "jobstore");
            c.set(JobstoreOptions.URL, fake.url());
            c.set(JobstoreOptions.MODE, "consul");
            IllegalConfigurationException e = PluginSelfTest.expect(IllegalConfigurationException.class,
                    () -> new JobstoreHaServicesFactory().createHAServices(c, io));
            PluginSelfTest.check(e.getMessage().contains("standalone, zookeeper, kubernetes or jobstore"), "message: " + e.getMessage());
            PluginSelfTest.expect(IllegalConfigurationException.class,
                    () -> new JobstoreHaServicesFactory().createClientHAServices(c));
        });

        t.test("mode kubernetes: builds Flink's KubernetesLeaderElectionHaServices from kubernetes.cluster-id etc., forwards to them, results in jobstore", () -> {
            Path dir = Files.createTempDirectory("jobstore-k8s-selftest");
            try (FakeKubernetesApi api = new FakeKubernetesApi()) {
                // A kubeconfig pointing at a fake API server (Flink's services watch the
                // cluster's ConfigMap from their constructor on).
                Path kubeconfig = dir.resolve("kubeconfig");
                Files.write(kubeconfig, ("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                        + "    server: " + api.url() + "\ncontexts:\n- name: x\n  context:\n    cluster: c\n"
                        + "    user: u\n    namespace: selftest\ncurrent-context: x\nusers:\n- name: u\n  user:\n"
                        + "    token: t\n").getBytes(StandardCharsets.UTF_8));
                Configuration c = new Configuration();
                c.set(HighAvailabilityOptions.HA_MODE, JobstoreHaServicesFactory.class.getName());
                c.set(JobstoreOptions.MODE, "kubernetes");
                c.set(JobstoreOptions.URL, fake.url());
                c.setString("kubernetes.cluster-id", "selftest-k8s");
                c.setString("kubernetes.namespace", "selftest");
                c.setString("kubernetes.config.file", kubeconfig.toString());
                c.set(HighAvailabilityOptions.HA_STORAGE_PATH, dir.resolve("ha").toUri().toString());
                c.set(HighAvailabilityOptions.HA_CLUSTER_ID, "selftest-k8s");
                try (HighAvailabilityServices ha = new JobstoreHaServicesFactory().createHAServices(c, io)) {
                    JobstoreResultStoresHaServices wrapper = JobstoreResultStoresHaServices.of(ha);
                    PluginSelfTest.check(wrapper != null, "type " + ha);
                    HighAvailabilityServices d = wrapper.delegate();
                    PluginSelfTest.checkEq("org.apache.flink.kubernetes.highavailability.KubernetesLeaderElectionHaServices",
                            d.getClass().getName(), "wrapped services");
                    PluginSelfTest.check(ha.getJobResultStore() instanceof JobstoreJobResultStore, "job result store");
                    PluginSelfTest.check(ha.getApplicationResultStore() instanceof JobstoreApplicationResultStore,
                            "application result store");
                    PluginSelfTest.check(!(d.getJobResultStore() instanceof JobstoreJobResultStore),
                            "the wrapped services keep their own (unused) store: " + d.getJobResultStore().getClass());
                    PluginSelfTest.checkEq("org.apache.flink.kubernetes.highavailability.KubernetesCheckpointRecoveryFactory",
                            ha.getCheckpointRecoveryFactory().getClass().getName(), "checkpoint recovery factory");
                    PluginSelfTest.checkEq(d.createBlobStore(), ha.createBlobStore(), "blob store");
                    String plan = ha.getExecutionPlanStore().getClass().getName();
                    PluginSelfTest.check(plan.equals("org.apache.flink.runtime.jobmanager.DefaultExecutionPlanStore"),
                            "execution plan store " + plan);
                    PluginSelfTest.check(fieldTypes(ha.getExecutionPlanStore()).contains(
                                    "org.apache.flink.kubernetes.highavailability.KubernetesStateHandleStore"),
                            "execution plans in ConfigMaps: " + fieldTypes(ha.getExecutionPlanStore()));
                    PluginSelfTest.check(fieldTypes(ha.getDispatcherLeaderRetriever()).stream().anyMatch(n -> n.contains("Kubernetes")),
                            "dispatcher retriever through Kubernetes: " + fieldTypes(ha.getDispatcherLeaderRetriever()));
                    PluginSelfTest.check(ha.getClusterRestEndpointLeaderRetriever() != null, "rest endpoint retriever");
                    System.out.println("# kubernetes: wrapped " + d.getClass().getName() + ", execution plans "
                            + fieldTypes(ha.getExecutionPlanStore()) + "; API requests " + api.requests());
                    PluginSelfTest.check(api.requests().stream().anyMatch(r -> r.contains("/namespaces/selftest/configmaps")),
                            "Flink's services asked the API server for the cluster's ConfigMaps: " + api.requests());
                }
                try (ClientHighAvailabilityServices client = new JobstoreHaServicesFactory().createClientHAServices(c)) {
                    PluginSelfTest.check(fieldTypes(client.getClusterRestEndpointLeaderRetriever()).stream()
                                    .anyMatch(n -> n.contains("Kubernetes")),
                            "client finds the REST endpoint through Kubernetes: " + client.getClass().getName() + " "
                                    + fieldTypes(client.getClusterRestEndpointLeaderRetriever()));
                }
            } finally {
                try (Stream<Path> s = Files.walk(dir)) {
                    s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                }
            }
        });

        t.test("replicas: jobstore.url is a comma-separated list; empty entries and duplicates rejected", () -> {
            Configuration c = new Configuration();
            c.set(JobstoreOptions.URL, " http://127.0.0.1:1/ , http://127.0.0.1:2/p ");
            JobstoreClient cl = JobstoreClientConfig.client(c);
            PluginSelfTest.checkEq(Arrays.asList("http://127.0.0.1:1", "http://127.0.0.1:2/p"), cl.baseUrls(), "replicas");
            PluginSelfTest.checkEq("http://127.0.0.1:1", cl.currentUrl(), "starts with the first");
            c.set(JobstoreOptions.URL, "http://127.0.0.1:1,,http://127.0.0.1:2");
            PluginSelfTest.expect(IllegalConfigurationException.class, () -> JobstoreClientConfig.client(c));
            c.set(JobstoreOptions.URL, "http://127.0.0.1:1,http://127.0.0.1:1/");
            PluginSelfTest.expect(IllegalConfigurationException.class, () -> JobstoreClientConfig.client(c));
            c.set(JobstoreOptions.URL, "http://127.0.0.1:1,ftp://x");
            PluginSelfTest.expect(IllegalConfigurationException.class, () -> JobstoreClientConfig.client(c));
        });

        t.test("replicas: connection refused on the first -> the same call goes to the next at once, later calls stay there", () -> {
            // Backoff 3 s: a pause before the second replica would show in the elapsed time.
            JobstoreClient c = client(closedPortUrl() + "," + fake.url(), 3000, 2);
            JobstoreJobResultStore s = new JobstoreJobResultStore(c, io);
            JobID id = new JobID();
            fake.clearRequests();
            long t0 = System.nanoTime();
            s.createDirtyResultInternal(new JobResultEntry(finished(id)));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            PluginSelfTest.check(ms < 2500, "no backoff before the untried replica: " + ms + " ms");
            PluginSelfTest.checkEq(fake.url(), c.currentUrl(), "replica in use");
            PluginSelfTest.check(s.hasDirtyJobResultEntryInternal(id), "entry landed on the second replica");
            PluginSelfTest.checkEq(2, fake.requests().size(), "both calls on the second replica");
        });

        t.test("replicas: 503 from the replica in use -> next replica; 429 is retried on the same one", () -> {
            try (FakeJobstore other = new FakeJobstore()) {
                JobstoreClient c = client(fake.url() + "," + other.url(), 10, 3);
                JobstoreJobResultStore s = new JobstoreJobResultStore(c, io);
                JobID id = new JobID();
                fake.clearRequests();
                fake.failNext("POST", FakeJobstore.Fault.STATUS_503);
                s.createDirtyResultInternal(new JobResultEntry(finished(id)));
                fake.failNext("POST");
                PluginSelfTest.checkEq(other.url(), c.currentUrl(), "switched after 503");
                PluginSelfTest.checkEq(1, fake.requests().size(), "one attempt on the first");
                PluginSelfTest.checkEq(1, other.requests().size(), "then the second");
                other.clearRequests();
                other.failNext("GET", FakeJobstore.Fault.STATUS_429);
                PluginSelfTest.check(s.hasDirtyJobResultEntryInternal(id), "read after a 429");
                PluginSelfTest.checkEq(2, other.requests().size(), "429 retried on the same replica");
                PluginSelfTest.checkEq(other.url(), c.currentUrl(), "still the second");
            }
        });

        t.test("replicas: a lost answer on one replica, the retry on the next meets 409 of our own entry -> success", () -> {
            try (FakeJobstore shared = new FakeJobstore()) {
                // Two URLs of one store (one database behind two replicas): the first drops the answer.
                JobstoreClient c = client(shared.url() + "," + shared.url().replace("127.0.0.1", "localhost"), 10, 3);
                JobstoreJobResultStore s = new JobstoreJobResultStore(c, io);
                JobID id = new JobID();
                shared.failNext("POST", FakeJobstore.Fault.APPLY_THEN_DROP);
                s.createDirtyResultInternal(new JobResultEntry(finished(id)));
                shared.failNext("POST");
                PluginSelfTest.check(c.currentUrl().contains("localhost"), "switched: " + c.currentUrl());
                PluginSelfTest.check(s.hasDirtyJobResultEntryInternal(id), "entry is there once");
            }
        });

        t.test("replicas: all down -> IOException after 1 + retries attempts naming the replicas", () -> {
            String a = closedPortUrl();
            String b = closedPortUrl();
            JobstoreClient c = client(a + "," + b, 10, 3);
            JobstoreJobResultStore s = new JobstoreJobResultStore(c, io);
            IOException e = PluginSelfTest.expect(IOException.class, () -> s.hasDirtyJobResultEntryInternal(new JobID()));
            PluginSelfTest.check(e.getMessage().contains("4 attempt") && e.getMessage().contains(a)
                    && e.getMessage().contains(b), "message: " + e.getMessage());
        });
    }

    private static String callNames(List<Call> calls) {
        List<String> names = new ArrayList<>();
        for (Call c : calls) {
            names.add(c.method);
        }
        return names.toString();
    }

    /** The class names of the (non-static) field values of an object and its superclasses. */
    static List<String> fieldTypes(Object o) {
        List<String> names = new ArrayList<>();
        for (Class<?> k = o.getClass(); k != null && k != Object.class; k = k.getSuperclass()) {
            for (java.lang.reflect.Field f : k.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) || f.getType().isPrimitive()) {
                    continue;
                }
                try {
                    f.setAccessible(true);
                    Object v = f.get(o);
                    if (v != null) {
                        names.add(v.getClass().getName());
                    }
                } catch (RuntimeException | IllegalAccessException e) {
                    // module boundaries: skip
                }
            }
        }
        return names;
    }
}
