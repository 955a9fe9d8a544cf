package io.jobstore.flink.ha;

import org.apache.flink.api.common.ApplicationID;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobInfo;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.IllegalConfigurationException;
import org.apache.flink.core.execution.RecoveryClaimMode;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.application.AbstractApplication;
import org.apache.flink.runtime.blob.PermanentBlobService;
import org.apache.flink.runtime.checkpoint.CheckpointIDCounter;
import org.apache.flink.runtime.checkpoint.CheckpointRecoveryFactory;
import org.apache.flink.runtime.highavailability.ClientHighAvailabilityServices;
import org.apache.flink.runtime.highavailability.HighAvailabilityServices;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobmanager.ApplicationStore;
import org.apache.flink.runtime.jobmanager.ApplicationStoreEntry;
import org.apache.flink.runtime.jobmanager.ExecutionPlanStore;
import org.apache.flink.runtime.leaderelection.LeaderContender;
import org.apache.flink.runtime.leaderelection.LeaderElection;
import org.apache.flink.runtime.leaderelection.LeaderElectionDriver;
import org.apache.flink.runtime.leaderelection.LeaderInformation;
import org.apache.flink.runtime.leaderelection.LeaderInformationRegister;
import org.apache.flink.runtime.leaderretrieval.LeaderRetrievalListener;
import org.apache.flink.runtime.leaderretrieval.LeaderRetrievalService;
import org.apache.flink.runtime.persistence.IntegerResourceVersion;
import org.apache.flink.runtime.persistence.PossibleInconsistentStateException;
import org.apache.flink.runtime.persistence.StateHandleStore;
import org.apache.flink.runtime.persistence.filesystem.FileSystemStateStorageHelper;
import org.apache.flink.runtime.state.RetrievableStateHandle;
import org.apache.flink.runtime.state.SharedStateRegistry;
import org.apache.flink.streaming.api.graph.ExecutionPlan;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.ConcurrentModificationException;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Self-test of {@code jobstore.ha.mode: jobstore}: the lease-based leader election driver, leader
 * retrieval through the long poll, the state-handle store, the checkpoint id counter, and Flink's
 * own leader election service and stores over them.
 *
 * <ul>
 *   <li>{@code HaSelfTest --fake}: against the in-memory fake with fault injection and replicas
 *       (also run by {@code PluginSelfTest --fake}).
 *   <li>{@code HaSelfTest --url URL [--token T]}: the cases that need no fault injection, against
 *       a real jobstore that has the HA routes (fresh random cluster ids).
 * </ul>
 */
final class HaSelfTest {

    /** Short timing, so that expiries and takeovers happen within the test. */
    static final Duration LEASE = Duration.ofMillis(2000);
    static final Duration RENEW = Duration.ofMillis(250);

    private final PluginSelfTest t;
    private final ExecutorService io;
    private String urls;
    private String token;
    /** Null against a real jobstore. */
    private FakeJobstore fake;

    HaSelfTest(PluginSelfTest t) {
        this.t = t;
        this.io = t.io();
    }

    // --- helpers ------------------------------------------------------------------------------------

    static String cluster() {
        return "ha-selftest-" + UUID.randomUUID().toString().substring(0, 8);
    }

    JobstoreClient client(String replicas, String cluster, int retries) {
        return client(replicas, cluster, retries, Duration.ofSeconds(2));
    }

    /** A client whose attempts each have {@code timeout} for their whole answer. */
    JobstoreClient client(String replicas, String cluster, int retries, Duration timeout) {
        return new JobstoreClient(
                replicas, cluster, token, timeout, retries, Duration.ofMillis(20), Duration.ofMillis(100), 1000);
    }

    static void waitFor(String what, long millis, BooleanSupplier condition) throws InterruptedException {
        long until = System.nanoTime() + millis * 1_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - until > 0) {
                throw new AssertionError("timed out after " + millis + " ms waiting for " + what);
            }
            Thread.sleep(5);
        }
    }

    static String closedPortUrl() throws IOException {
        try (ServerSocket ss = new ServerSocket(0)) {
            return "http://127.0.0.1:" + ss.getLocalPort();
        }
    }

    /** What a driver told its listener, in order, with the times of grants and revocations. */
    static final class Events implements LeaderElectionDriver.Listener {
        final List<String> log = Collections.synchronizedList(new ArrayList<>());
        final List<Long> nanos = Collections.synchronizedList(new ArrayList<>());
        final List<UUID> sessions = Collections.synchronizedList(new ArrayList<>());
        final List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        volatile LeaderInformationRegister register;

        @Override
        public void onGrantLeadership(UUID session) {
            nanos.add(System.nanoTime());
            sessions.add(session);
            log.add("grant");
        }

        @Override
        public void onRevokeLeadership() {
            nanos.add(System.nanoTime());
            log.add("revoke");
        }

        @Override
        public void onLeaderInformationChange(String componentId, LeaderInformation info) {
            register = LeaderInformationRegister.of(componentId, info);
        }

        @Override
        public void onLeaderInformationChange(LeaderInformationRegister changed) {
            register = changed;
        }

        @Override
        public void onError(Throwable t) {
            errors.add(t);
        }

        int count(String event) {
            synchronized (log) {
                return (int) log.stream().filter(event::equals).count();
            }
        }

        /** grant, revoke, grant, ...: never two grants (or revocations) in a row. */
        void checkAlternating() {
            synchronized (log) {
                for (int i = 0; i < log.size(); i++) {
                    PluginSelfTest.checkEq(i % 2 == 0 ? "grant" : "revoke", log.get(i), "event " + i + " of " + log);
                }
            }
            PluginSelfTest.check(errors.isEmpty(), "errors: " + errors);
        }
    }

    /** One simulated JobManager process: its own client, lease claim, long poll and driver. */
    final class Process implements AutoCloseable {
        final JobstoreLeaderElectionHaServices.Backend backend;
        final Events events = new Events();
        JobstoreLeaderElectionDriver driver;

        Process(String replicas, String cluster) {
            backend =
                    new JobstoreLeaderElectionHaServices.Backend(
                            client(replicas, cluster, 2),
                            new Leadership(Leadership.newHolderId(), LEASE, RENEW),
                            Duration.ofSeconds(1));
        }

        Process start() {
            driver = (JobstoreLeaderElectionDriver) backend.createDriver(events);
            return this;
        }

        /** Starts the driver and waits until it leads. */
        Process leading() throws InterruptedException {
            start().awaitGrants(1);
            return this;
        }

        long epoch() {
            return backend.leadership.currentEpoch();
        }

        /** The lease of the current term (null: not leading). */
        HaApi.Lease lease() {
            return backend.leadership.currentLease();
        }

        void awaitGrants(int n) throws InterruptedException {
            await("grant", n);
        }

        void awaitRevocations(int n) throws InterruptedException {
            await("revoke", n);
        }

        private void await(String event, int n) throws InterruptedException {
            waitFor(n + " " + event + "(s) of " + backend.leadership.holder + " (" + events.log + ")", 10_000,
                    () -> events.count(event) >= n);
        }

        @Override
        public void close() throws Exception {
            if (driver != null) {
                driver.close();
            }
            backend.watcher.close();
        }
    }

    /** The current leader information as stored (one immediate read). */
    HaApi.Listing listing(HaApi api) throws IOException {
        return api.pollLeaderInfo(null, Duration.ZERO);
    }

    // --- runs -----------------------------------------------------------------------------------------

    void runAgainstFake(FakeJobstore fake) throws Exception {
        this.fake = fake;
        this.urls = fake.url();
        this.token = null;
        configuration();
        election();
        failoverAtExpiry();
        faults();
        lostAcquisition();
        replicaFailover();
        fencing();
        externalChanges();
        retrieval();
        stateHandles();
        stateHandleFaults();
        pagedListing();
        counter();
        flinkServices();
    }

    void runAgainstJobstore(String url, String token) throws Exception {
        this.fake = null;
        this.urls = url;
        this.token = token;
        election();
        failoverAtExpiry();
        fencing();
        externalChanges();
        retrieval();
        stateHandles();
        pagedListing();
        counter();
        flinkServices();
    }

    // --- configuration --------------------------------------------------------------------------

    private void configuration() {
        t.test("jobstore mode: lease 15 s and renew interval 5 s by default; renew >= lease, zero and > 24 h refused; storageDir required", () -> {
            Configuration c = new Configuration();
            Leadership l = Leadership.fromConfiguration(c);
            PluginSelfTest.checkEq(Duration.ofSeconds(15), l.lease, "lease");
            PluginSelfTest.checkEq(Duration.ofSeconds(5), l.renewInterval, "renew interval");
            PluginSelfTest.checkEq(Duration.ofMillis(1500), l.margin(), "margin (a tenth of the lease)");
            c.set(JobstoreOptions.RENEW_INTERVAL, Duration.ofSeconds(15));
            IllegalConfigurationException e =
                    PluginSelfTest.expect(IllegalConfigurationException.class, () -> Leadership.fromConfiguration(c));
            PluginSelfTest.check(e.getMessage().contains("jobstore.ha.renew-interval")
                    && e.getMessage().contains("shorter than 'jobstore.ha.lease-duration'"), "message: " + e.getMessage());
            c.set(JobstoreOptions.RENEW_INTERVAL, Duration.ZERO);
            PluginSelfTest.expect(IllegalConfigurationException.class, () -> Leadership.fromConfiguration(c));
            c.set(JobstoreOptions.RENEW_INTERVAL, Duration.ofSeconds(1));
            c.set(JobstoreOptions.LEASE_DURATION, Duration.ofHours(25));
            PluginSelfTest.expect(IllegalConfigurationException.class, () -> Leadership.fromConfiguration(c));
            c.set(JobstoreOptions.LEASE_DURATION, Duration.ofMillis(1100));
            PluginSelfTest.checkEq(Duration.ofMillis(50), Leadership.fromConfiguration(c).margin(),
                    "margin (half of lease minus renew interval)");

            Configuration m = new Configuration();
            m.set(JobstoreOptions.MODE, "jobstore");
            m.set(JobstoreOptions.URL, urls);
            m.set(HighAvailabilityOptions.HA_MODE, JobstoreHaServicesFactory.class.getName());
            Exception missing = PluginSelfTest.expect(Exception.class,
                    () -> new JobstoreHaServicesFactory().createHAServices(m, io));
            PluginSelfTest.check(String.valueOf(missing.getMessage()).contains("high-availability.storageDir"),
                    "message: " + missing);
            m.set(JobstoreOptions.RENEW_INTERVAL, Duration.ofSeconds(20));
            PluginSelfTest.expect(IllegalConfigurationException.class,
                    () -> new JobstoreHaServicesFactory().createHAServices(m, io));
        });
    }

    // --- leader election -----------------------------------------------------------------------------

    interface ClusterCase {
        void run(String cluster) throws Exception;
    }

    /** A case on a cluster id of its own. */
    private void clusterCase(String name, ClusterCase body) {
        t.test(name, () -> body.run(cluster()));
    }

    interface LeaderAndStandby {
        void run(String cluster, Process a, Process b) throws Exception;
    }

    /**
     * A case with two JobManagers of a new cluster on {@code urls}: {@code a} leading, {@code b}
     * not started yet; both closed after.
     */
    private void leaderAndStandby(String name, LeaderAndStandby body) {
        clusterCase(name, cluster -> {
            try (Process a = new Process(urls, cluster).leading(); Process b = new Process(urls, cluster)) {
                body.run(cluster, a, b);
            }
        });
    }

    private void election() {
        leaderAndStandby("lease driver: one of two JobManagers is granted, once, with a session id and its epoch; the other"
                + " waits; closing the leader releases the lease and the other is granted with a higher epoch", (cluster, a, b) -> {
            long e1 = a.epoch();
            HaApi.Lease l1 = a.lease();
            PluginSelfTest.check(e1 > 0 && a.driver.hasLeadership(), "a leads with epoch " + e1);
            PluginSelfTest.check(l1.leaseId.matches("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
                    "a's lease id is a UUID: " + l1.leaseId);
            PluginSelfTest.check(l1.toString().contains(l1.leaseId.substring(0, 8))
                    && !l1.toString().contains(l1.leaseId), "the lease logs its id short: " + l1);
            b.start();
            Thread.sleep(4 * RENEW.toMillis());
            PluginSelfTest.checkEq(Collections.emptyList(), b.events.log, "b's events while a leads");
            PluginSelfTest.check(!b.driver.hasLeadership(), "b does not lead");
            PluginSelfTest.checkEq(Collections.singletonList("grant"), a.events.log, "a's events");
            if (fake != null) {
                PluginSelfTest.checkEq(l1, fake.ha.liveLease(cluster), "the fake's live lease");
                PluginSelfTest.checkEq(a.backend.leadership.holder, fake.ha.liveHolder(cluster), "holder");
            }
            long closed = System.nanoTime();
            a.driver.close();
            b.awaitGrants(1);
            long ms = (b.events.nanos.get(0) - closed) / 1_000_000;
            PluginSelfTest.check(ms < LEASE.toMillis(), "b granted " + ms + " ms after a closed: the lease was released, not left to expire");
            PluginSelfTest.check(b.epoch() > e1, "b's epoch " + b.epoch() + " > " + e1);
            PluginSelfTest.check(!b.lease().leaseId.equals(l1.leaseId), "b's lease id is new");
            PluginSelfTest.check(!b.events.sessions.get(0).equals(a.events.sessions.get(0)), "new session id");
            a.events.checkAlternating();
            b.events.checkAlternating();
        });
    }

    /**
     * A JobManager that leads by hand, through the lease routes only: acquires, renews, then stops
     * renewing (dies silently) or releases. Answers when (System.nanoTime) its last renewal was sent.
     */
    private long leadByHand(HaApi api, String holder, int renewals) throws Exception {
        HaApi.Lease held = api.acquire(holder, LEASE, Duration.ofSeconds(2));
        PluginSelfTest.check(held != null, "the hand-made leader acquired the lease");
        long last = System.nanoTime();
        for (int i = 0; i < renewals; i++) {
            Thread.sleep(RENEW.toMillis());
            last = System.nanoTime();
            PluginSelfTest.check(api.renew(holder, held, LEASE, Duration.ofSeconds(2)), "renewed");
        }
        return last;
    }

    private void failoverAtExpiry() {
        t.test("lease driver: a standby waits for the lease in jobstore, not for a renew interval: it leads within"
                + " 1 s of the leader's release, and within the lease + 1 s of the last renewal of a leader that"
                + " died silently (the 409's Jobstore-Lease-Expires-In-Ms, the long poll of GET .../lease)", () -> {
            // A release: the standby's long poll answers at once.
            String cluster = cluster();
            try (Process a = new Process(urls, cluster).leading(); Process b = new Process(urls, cluster).start()) {
                Thread.sleep(3 * RENEW.toMillis());
                PluginSelfTest.check(!b.driver.hasLeadership(), "b waits while a leads");
                if (fake != null) {
                    long acquires = fake.requests("POST", "/ha/lease/acquire").size();
                    Thread.sleep(LEASE.toMillis());
                    long during = fake.requests("POST", "/ha/lease/acquire").size() - acquires;
                    PluginSelfTest.check(during <= 4, "b asked " + during + " times in " + LEASE.toMillis()
                            + " ms while a renewed: it waits on the long poll, not in a loop");
                }
                long closed = System.nanoTime();
                a.driver.close();
                b.awaitGrants(1);
                long ms = (b.events.nanos.get(0) - closed) / 1_000_000;
                System.out.println("# a release: the standby led " + ms + " ms after the leader closed (lease "
                        + LEASE.toMillis() + " ms, renew " + RENEW.toMillis() + " ms)");
                PluginSelfTest.check(ms < 1_000, "b granted " + ms + " ms after a released the lease (must be < 1000)");
            }
            // A silent death: the standby leads at the lease's expiry.
            cluster = cluster();
            HaApi dead = new HaApi(client(urls, cluster, 0), () -> {});
            try (Process b = new Process(urls, cluster)) {
                long lastRenewal = leadByHand(dead, "jm-dead", 2);
                b.start();
                b.awaitGrants(1);
                long ms = (b.events.nanos.get(0) - lastRenewal) / 1_000_000;
                System.out.println("# a silent death: the standby led " + ms + " ms after the leader's last renewal"
                        + " (lease " + LEASE.toMillis() + " ms, renew " + RENEW.toMillis() + " ms)");
                PluginSelfTest.check(ms >= LEASE.toMillis() - 50, "b granted " + ms + " ms after the last renewal: not"
                        + " before the lease expired");
                PluginSelfTest.check(ms < LEASE.toMillis() + 1_000,
                        "b granted " + ms + " ms after the last renewal (must be < lease + 1000)");
                b.events.checkAlternating();
            }
            if (fake == null) {
                return;
            }
            // A jobstore without the long poll (404): a renew interval between tries, as before.
            cluster = cluster();
            fake.ha.leaseRouteMissing(true);
            try (Process b = new Process(urls, cluster)) {
                HaApi old = new HaApi(client(urls, cluster, 0), () -> {});
                long lastRenewal = leadByHand(old, "jm-dead", 1);
                b.start();
                b.awaitGrants(1);
                long ms = (b.events.nanos.get(0) - lastRenewal) / 1_000_000;
                System.out.println("# without GET .../lease: the standby led " + ms + " ms after the last renewal");
                PluginSelfTest.check(ms < LEASE.toMillis() + RENEW.toMillis() + 1_000,
                        "b granted " + ms + " ms after the last renewal (must be < lease + renew + 1000)");
            } finally {
                fake.ha.leaseRouteMissing(false);
            }
        });
    }

    private void faults() {
        t.test("lease driver: renewals failing (503) -> leadership revoked before the lease expires in jobstore; then"
                + " re-acquired with a new epoch and session id; grant and revoke alternate", () -> {
            revokedInTime(FakeJobstore.Fault.STATUS_503);
        });
        t.test("lease driver: renewals that hang (a frozen replica) -> revoked before the lease expires; re-acquired after", () -> {
            revokedInTime(FakeJobstore.Fault.HANG);
        });
        t.test("lease driver: renewals whose answers stop after their head (a replica frozen mid-answer) -> revoked"
                + " before the lease expires; re-acquired after", () -> {
            revokedInTime(FakeJobstore.Fault.APPLY_THEN_STALL);
        });
        clusterCase("lease driver: renewals that land but whose answers are lost -> revoked by the deadline; the next"
                + " term gets a new epoch and lease id although jobstore still holds the old lease live for this"
                + " JobManager (acquiring answers the old lease id: released, acquired again)", cluster -> {
            try (Process a = new Process(urls, cluster).leading()) {
                long e1 = a.epoch();
                HaApi.Lease l1 = a.lease();
                fake.fail("POST", "/ha/lease/renew", FakeJobstore.Fault.APPLY_THEN_503, -1);
                try {
                    a.awaitRevocations(1);
                    // jobstore held the old term live when the driver revoked: the old lease
                    // ended (expired, or released by the driver's next acquisition, which may
                    // already have come) after the revocation
                    long revoked = a.events.nanos.get(1);
                    long ended = fake.ha.expiryNanos(cluster, l1.leaseId);
                    PluginSelfTest.check(ended > revoked, "jobstore still held the old term live at the"
                            + " revocation; it ended " + (revoked - ended) / 1_000_000 + " ms before");
                    a.awaitGrants(2);
                    PluginSelfTest.check(a.epoch() > e1, "new epoch " + a.epoch() + " > " + e1);
                    PluginSelfTest.check(!a.lease().leaseId.equals(l1.leaseId), "new lease id");
                    PluginSelfTest.checkEq(a.lease(), fake.ha.liveLease(cluster), "the live lease is the new term's");
                    PluginSelfTest.check(fake.requests("POST", "/ha/lease/release").stream()
                                    .anyMatch(r -> r.body.contains(l1.leaseId) && r.status == 200),
                            "the earlier term's lease was released");
                } finally {
                    fake.clearFaults();
                }
                a.events.checkAlternating();
            }
        });
        leaderAndStandby("lease driver: the lease taken over (it expired, another JobManager acquired it) -> the renewal is"
                + " refused, leadership revoked at once; granted again after the other one leaves", (cluster, a, b) -> {
            long e1 = a.epoch();
            fake.ha.expire(cluster);
            b.start();
            b.awaitGrants(1);
            long taken = b.events.nanos.get(0);
            a.awaitRevocations(1);
            long ms = (a.events.nanos.get(1) - taken) / 1_000_000;
            PluginSelfTest.check(ms < 2 * RENEW.toMillis() + 500, "a revoked " + ms + " ms after b's grant");
            PluginSelfTest.check(!a.driver.hasLeadership() && b.driver.hasLeadership(), "b leads, a does not");
            PluginSelfTest.check(b.epoch() > e1, "b's epoch");
            Thread.sleep(3 * RENEW.toMillis());
            PluginSelfTest.checkEq(Arrays.asList("grant", "revoke"), a.events.log, "a waits while b leads");
            b.driver.close();
            a.awaitGrants(2);
            PluginSelfTest.check(a.epoch() > b.backend.leadership.currentEpoch() && a.epoch() > e1 + 1,
                    "a's new epoch " + a.epoch());
            PluginSelfTest.check(!a.events.sessions.get(0).equals(a.events.sessions.get(1)), "new session id");
            a.events.checkAlternating();
            b.events.checkAlternating();
        });
    }

    /** The port of a replica's URL (http://127.0.0.1:PORT). */
    private static int port(String url) {
        return Integer.parseInt(url.substring(url.lastIndexOf(':') + 1));
    }

    private void lostAcquisition() {
        clusterCase("lease driver: a database failover loses the leader's acquisition (the lease row back to the earlier"
                + " epoch) -> another JobManager acquires the same epoch with a new lease id; the first one's writes"
                + " (leader information, state handle, counter) are refused, it revokes, waits, and never writes"
                + " under the other's lease", cluster -> {
            String first = fake.addReplica();
            try (Process a = new Process(first, cluster).leading(); Process b = new Process(fake.url(), cluster)) {
                HaApi.Lease la = a.lease();
                UUID sa = a.events.sessions.get(0);
                a.driver.publishLeaderInformation("dispatcher", LeaderInformation.known(sa, "pekko://a/d"));
                waitFor("a's leader information", 5_000, () -> fake.ha.leaderEntry(cluster, "dispatcher") != null);
                // a's renewals do not get through for a while: b acquires before a learns of the loss
                fake.fail("POST", "/ha/lease/renew", FakeJobstore.Fault.STATUS_503, -1);
                long lost = System.nanoTime();
                fake.ha.loseLastAcquisition(cluster);
                HaApi.Lease lb;
                String job = new JobID().toHexString();
                try {
                    b.start();
                    b.awaitGrants(1);
                    lb = b.lease();
                    PluginSelfTest.checkEq(la.epoch, lb.epoch, "b acquired the lost epoch again");
                    PluginSelfTest.check(!lb.leaseId.equals(la.leaseId), "with a new lease id: " + lb + " vs " + la);
                    PluginSelfTest.check(!la.equals(lb), "the two leases differ");
                    PluginSelfTest.checkEq(la, a.lease(), "a still holds its term locally (its deadline has not passed)");
                    UUID sb = b.events.sessions.get(0);
                    b.driver.publishLeaderInformation("dispatcher", LeaderInformation.known(sb, "pekko://b/d"));
                    waitFor("b's leader information", 5_000, () -> {
                        return "pekko://b/d".equals(fake.ha.leaderEntry(cluster, "dispatcher").path("address").asText());
                    });
                    // a writes as it believes it leads: every write names a's lease and is refused
                    a.driver.publishLeaderInformation("dispatcher", LeaderInformation.known(sa, "pekko://a/d2"));
                    CheckpointIDCounter counter =
                            new JobstoreCheckpointIDCounter(a.backend.api, a.backend.leadership, new JobID(), io);
                    PluginSelfTest.expect(HaApi.NotLeaderException.class, counter::getAndIncrement);
                    PluginSelfTest.expect(HaApi.NotLeaderException.class,
                            () -> a.backend.api.addHandle(a.backend.leadership.heldLease(), HaApi.EXECUTION_PLAN, null, job,
                                    new byte[] {1}));
                    PluginSelfTest.expect(HaApi.NotLeaderException.class,
                            () -> a.backend.api.publishLeaderInfo(a.backend.leadership.heldLease(), "resourcemanager",
                                    "pekko://a/rm", sa.toString()));
                    waitFor("a's own leader-info write refused", 5_000, () -> fake.requests("PUT", "/ha/leader-info/dispatcher")
                            .stream().anyMatch(r -> r.port == port(first) && r.nanos > lost && r.status == 409));
                } finally {
                    fake.clearFaults();
                }
                a.awaitRevocations(1);
                PluginSelfTest.check(!a.driver.hasLeadership() && b.driver.hasLeadership(), "b leads, a does not");
                long ms = (a.events.nanos.get(1) - lost) / 1_000_000;
                System.out.println("# lost acquisition: a revoked " + ms + " ms after the loss (lease " + LEASE.toMillis()
                        + " ms, its renewals failing until b led)");
                Thread.sleep(3 * RENEW.toMillis());
                PluginSelfTest.checkEq(Arrays.asList("grant", "revoke"), a.events.log, "a waits while b leads");
                PluginSelfTest.checkEq(lb, fake.ha.liveLease(cluster), "b's lease is the live one");
                PluginSelfTest.checkEq("pekko://b/d", fake.ha.leaderEntry(cluster, "dispatcher").path("address").asText(),
                        "b's leader information stands");
                PluginSelfTest.check(fake.ha.leaderEntry(cluster, "resourcemanager") == null, "a's resourcemanager refused");
                PluginSelfTest.check(fake.ha.handleEntry(cluster, HaApi.EXECUTION_PLAN, null, job) == null, "a's handle refused");
                int aWrites = 0;
                for (FakeJobstore.Request r : fake.requests()) {
                    if (r.port != port(first) || !r.path.contains(cluster)) {
                        continue;
                    }
                    PluginSelfTest.check(!r.body.contains(lb.leaseId), "a named b's lease: " + r + " " + r.body);
                    if (r.nanos > lost && !r.method.equals("GET") && !r.path.contains("/lease/")) {
                        aWrites++;
                        PluginSelfTest.checkEq(409, r.status, "a's write after the loss: " + r + " " + r.body);
                    }
                }
                PluginSelfTest.check(aWrites >= 3, "a's writes after the loss reached jobstore: " + aWrites);
                b.driver.close();
                a.awaitGrants(2);
                PluginSelfTest.check(a.epoch() > lb.epoch, "a's next term has a higher epoch: " + a.lease());
                a.events.checkAlternating();
                b.events.checkAlternating();
            } finally {
                fake.clearFaults();
                fake.stopReplica(first);
            }
        });
        clusterCase("lease driver: a database failover loses the leader's own acquisition and no one else takes the lease"
                + " -> its renewal is refused, it revokes; acquiring again answers the same epoch with a new lease id:"
                + " a new term, led on with a new session; only the new lease writes", cluster -> {
            try (Process a = new Process(urls, cluster).leading()) {
                HaApi.Lease l1 = a.lease();
                fake.ha.loseLastAcquisition(cluster);
                a.awaitRevocations(1);
                a.awaitGrants(2);
                HaApi.Lease l2 = a.lease();
                PluginSelfTest.checkEq(l1.epoch, l2.epoch, "the same epoch again");
                PluginSelfTest.check(!l1.leaseId.equals(l2.leaseId), "a new lease id");
                PluginSelfTest.check(!l1.equals(l2) && l2.equals(new HaApi.Lease(l2.epoch, l2.leaseId))
                        && l2.hashCode() == new HaApi.Lease(l2.epoch, l2.leaseId).hashCode(), "Lease equality");
                PluginSelfTest.checkEq(l2, fake.ha.liveLease(cluster), "the live lease");
                PluginSelfTest.check(!a.events.sessions.get(0).equals(a.events.sessions.get(1)), "new session id");
                String job = new JobID().toHexString();
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> a.backend.api.getAndIncrement(l1, job));
                PluginSelfTest.checkEq(1L, a.backend.api.getAndIncrement(a.backend.leadership.heldLease(), job), "the new term writes");
                Thread.sleep(2 * RENEW.toMillis());
                PluginSelfTest.checkEq(Arrays.asList("grant", "revoke", "grant"), a.events.log, "the new term holds");
                a.events.checkAlternating();
            }
        });
    }

    private void revokedInTime(FakeJobstore.Fault fault) throws Exception {
        String cluster = cluster();
        try (Process a = new Process(urls, cluster).leading()) {
            long e1 = a.epoch();
            HaApi.Lease l1 = a.lease();
            Thread.sleep(2 * RENEW.toMillis());
            fake.fail("POST", "/ha/lease/", fault, -1);
            try {
                a.awaitRevocations(1);
                long revoked = a.events.nanos.get(1);
                long expiry = fake.ha.expiryNanos(cluster, l1.leaseId);
                PluginSelfTest.check(revoked < expiry,
                        "revoked " + (expiry - revoked) / 1_000_000 + " ms before the lease expired in jobstore"
                                + " (must be > 0)");
                PluginSelfTest.check(!a.driver.hasLeadership(), "no leadership after the revocation");
                System.out.println("# " + fault + ": revoked " + (expiry - revoked) / 1_000_000
                        + " ms before the lease's expiry in the fake (lease " + LEASE.toMillis() + " ms, renew "
                        + RENEW.toMillis() + " ms)");
                Thread.sleep(RENEW.toMillis());
                PluginSelfTest.checkEq(1, a.events.count("grant"), "no grant while the lease routes fail");
            } finally {
                fake.clearFaults();
            }
            a.awaitGrants(2);
            PluginSelfTest.check(a.epoch() > e1, "new epoch " + a.epoch() + " > " + e1);
            PluginSelfTest.check(!a.events.sessions.get(1).equals(a.events.sessions.get(0)), "new session id");
            a.events.checkAlternating();
        }
    }

    private void replicaFailover() {
        clusterCase("lease driver: the jobstore replica in use stops -> renewals go to the other replica, the lease and"
                + " the leadership are kept (no revocation, same epoch)", cluster -> {
            String first = fake.addReplica();
            try (Process a = new Process(first + "," + fake.url(), cluster).leading()) {
                long e1 = a.epoch();
                PluginSelfTest.checkEq(first, a.backend.leaseApi.client().currentUrl(), "lease on the first replica");
                fake.stopReplica(first);
                Thread.sleep(3 * LEASE.toMillis());
                PluginSelfTest.checkEq(Collections.singletonList("grant"), a.events.log, "events");
                PluginSelfTest.checkEq(e1, a.epoch(), "epoch");
                PluginSelfTest.check(a.driver.hasLeadership(), "still leads");
                PluginSelfTest.checkEq(e1, fake.ha.liveEpoch(cluster), "lease live in jobstore");
                PluginSelfTest.checkEq(fake.url(), a.backend.leaseApi.client().currentUrl(), "renewing on the second replica");
            } finally {
                fake.stopReplica(first);
            }
        });
    }

    private void fencing() {
        leaderAndStandby("fencing: leader information is written with the leader's epoch; once the lease passed on, writes"
                + " with the old lease, or with the live epoch and another lease id (publish, delete, state handles,"
                + " counter, cleanups, renew, release) fail with NotLeaderException (or are refused) and change"
                + " nothing; a driver that does not lead writes nothing", (cluster, a, b) -> {
            long e1 = a.epoch();
            HaApi.Lease l1 = a.lease();
            UUID session = a.events.sessions.get(0);
            a.driver.publishLeaderInformation("dispatcher", LeaderInformation.known(session, "pekko://a/dispatcher"));
            HaApi api = a.backend.api;
            waitFor("a's leader information", 5_000, () -> {
                try {
                    return listing(api).records.containsKey("dispatcher");
                } catch (IOException e) {
                    return false;
                }
            });
            HaApi.LeaderRecord r = listing(api).records.get("dispatcher");
            PluginSelfTest.checkEq(e1, r.epoch, "epoch of the record");
            PluginSelfTest.checkEq("pekko://a/dispatcher", r.address, "address");
            PluginSelfTest.checkEq(session.toString(), r.sessionId, "session id");

            a.driver.close();
            b.start();
            b.awaitGrants(1);
            String job = new JobID().toHexString();
            // the old lease, and the live epoch with a lease id that is not the live one
            HaApi.Lease forged = new HaApi.Lease(b.epoch(), UUID.randomUUID().toString());
            for (HaApi.Lease stale : Arrays.asList(l1, forged)) {
                PluginSelfTest.expect(HaApi.NotLeaderException.class,
                        () -> api.publishLeaderInfo(stale, "dispatcher", "pekko://stale", UUID.randomUUID().toString()));
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> api.deleteLeaderInfo(stale, "dispatcher"));
                PluginSelfTest.expect(HaApi.NotLeaderException.class,
                        () -> api.addHandle(stale, HaApi.EXECUTION_PLAN, null, job, new byte[] {1, 2}));
                PluginSelfTest.expect(HaApi.NotLeaderException.class,
                        () -> api.replaceHandle(stale, HaApi.EXECUTION_PLAN, null, job, 1, new byte[] {1, 2}));
                PluginSelfTest.expect(HaApi.NotLeaderException.class,
                        () -> api.markForDeletion(stale, HaApi.EXECUTION_PLAN, null, job));
                PluginSelfTest.expect(HaApi.NotLeaderException.class,
                        () -> api.removeHandle(stale, HaApi.EXECUTION_PLAN, null, job));
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> api.getAndIncrement(stale, job));
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> api.setCounter(stale, job, 7));
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> api.deleteCounter(stale, job));
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> api.cleanupJob(stale, job));
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> api.cleanupCluster(stale));
                PluginSelfTest.check(!a.backend.leaseApi.renew(a.backend.leadership.holder, stale, LEASE, Duration.ofSeconds(2)),
                        "renewing " + stale + " is refused");
                PluginSelfTest.check(!b.backend.leaseApi.renew(b.backend.leadership.holder, stale, LEASE, Duration.ofSeconds(2)),
                        "b renewing " + stale + " is refused");
                PluginSelfTest.check(!b.backend.leaseApi.release(b.backend.leadership.holder, stale, Duration.ofSeconds(2)),
                        "b releasing " + stale + " does nothing");
            }
            PluginSelfTest.check(b.driver.hasLeadership(), "b still leads");
            PluginSelfTest.checkEq("pekko://a/dispatcher", listing(api).records.get("dispatcher").address, "unchanged");
            PluginSelfTest.check(api.getHandle(HaApi.EXECUTION_PLAN, null, job) == null, "no handle");
            PluginSelfTest.check(api.counter(job) == null, "no counter");
            PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> a.backend.leadership.heldLease());

            // a non-leading driver: publishing does nothing
            try (Process c = new Process(urls, cluster).start()) {
                Thread.sleep(2 * RENEW.toMillis());
                PluginSelfTest.check(!c.driver.hasLeadership(), "c does not lead");
                c.driver.publishLeaderInformation("dispatcher", LeaderInformation.known(UUID.randomUUID(), "pekko://c"));
                c.driver.deleteLeaderInformation("dispatcher");
                Thread.sleep(300);
                PluginSelfTest.checkEq("pekko://a/dispatcher", listing(api).records.get("dispatcher").address,
                        "the record after c's attempts");
            }
        });
    }

    private void externalChanges() {
        clusterCase("lease driver: leader information overwritten or deleted by someone else is reported to the listener", cluster -> {
            try (Process a = new Process(urls, cluster).leading()) {
                HaApi.Lease e = a.lease();
                UUID session = a.events.sessions.get(0);
                a.driver.publishLeaderInformation("resourcemanager", LeaderInformation.known(session, "pekko://a/rm"));
                waitFor("the published information reported", 5_000, () -> a.events.register != null
                        && a.events.register.forComponentIdOrEmpty("resourcemanager").equals(
                                LeaderInformation.known(session, "pekko://a/rm")));
                UUID other = UUID.randomUUID();
                a.backend.api.publishLeaderInfo(e, "resourcemanager", "pekko://elsewhere/rm", other.toString());
                waitFor("the overwritten information reported", 5_000, () -> a.events.register
                        .forComponentIdOrEmpty("resourcemanager")
                        .equals(LeaderInformation.known(other, "pekko://elsewhere/rm")));
                a.backend.api.deleteLeaderInfo(e, "resourcemanager");
                waitFor("the deletion reported", 5_000,
                        () -> !a.events.register.forComponentId("resourcemanager").isPresent());
            }
        });
    }

    // --- leader retrieval -------------------------------------------------------------------------

    /** Records what a retrieval service reported. */
    static final class Seen implements LeaderRetrievalListener {
        final List<String> leaders = Collections.synchronizedList(new ArrayList<>());

        @Override
        public void notifyLeaderAddress(String address, UUID session) {
            leaders.add(address + "/" + session);
        }

        @Override
        public void handleError(Exception e) {
            leaders.add("error " + e);
        }

        String last() {
            synchronized (leaders) {
                return leaders.isEmpty() ? null : leaders.get(leaders.size() - 1);
            }
        }
    }

    private void retrieval() {
        clusterCase("retrieval: another process learns of the leader's address promptly (long poll), of every change,"
                + " and of the deletion; information of an earlier leader's epoch is reported as no leader", cluster -> {
            try (Process a = new Process(urls, cluster).leading();
                    Process b = new Process(urls, cluster);
                    Process watcher = new Process(urls, cluster)) {
                HaApi.Lease e1 = a.lease();
                Seen seen = new Seen();
                LeaderRetrievalService rs = watcher.backend.watcher.retrievalService("dispatcher");
                rs.start(seen);
                Thread.sleep(200);
                UUID s1 = a.events.sessions.get(0);
                long published = System.nanoTime();
                a.backend.api.publishLeaderInfo(e1, "dispatcher", "pekko://a/d1", s1.toString());
                waitFor("the first address", 3_000, () -> ("pekko://a/d1/" + s1).equals(seen.last()));
                long ms = (System.nanoTime() - published) / 1_000_000;
                System.out.println("# retrieval: the new leader address was reported " + ms + " ms after the publish");
                PluginSelfTest.check(ms < 1_000, "reported within 1 s: " + ms + " ms");
                a.backend.api.publishLeaderInfo(e1, "dispatcher", "pekko://a/d2", s1.toString());
                waitFor("the changed address", 3_000, () -> ("pekko://a/d2/" + s1).equals(seen.last()));
                a.backend.api.deleteLeaderInfo(e1, "dispatcher");
                waitFor("no leader after the deletion", 3_000, () -> "null/null".equals(seen.last()));
                a.backend.api.publishLeaderInfo(e1, "dispatcher", "pekko://a/d3", s1.toString());
                waitFor("the third address", 3_000, () -> ("pekko://a/d3/" + s1).equals(seen.last()));

                // b takes over; its first record makes a's records stale
                a.driver.close();
                b.start();
                b.awaitGrants(1);
                UUID s2 = b.events.sessions.get(0);
                b.backend.api.publishLeaderInfo(b.lease(), "resourcemanager", "pekko://b/rm", s2.toString());
                waitFor("a's stale dispatcher reported as no leader", 3_000, () -> "null/null".equals(seen.last()));
                b.backend.api.publishLeaderInfo(b.lease(), "dispatcher", "pekko://b/d", s2.toString());
                waitFor("b's dispatcher", 3_000, () -> ("pekko://b/d/" + s2).equals(seen.last()));
                PluginSelfTest.checkEq(
                        Arrays.asList("pekko://a/d1/" + s1, "pekko://a/d2/" + s1, "null/null", "pekko://a/d3/" + s1,
                                "null/null", "pekko://b/d/" + s2),
                        new ArrayList<>(seen.leaders), "every change, once each");
                if (fake != null) {
                    int before = fake.requests("GET", "/ha/leader-info?wait-ms=").size();
                    Thread.sleep(3_000);
                    int polls = fake.requests("GET", "/ha/leader-info?wait-ms=").size() - before;
                    System.out.println("# retrieval: " + polls + " leader-info requests by 3 processes in 3 s without changes (wait 1 s)");
                    PluginSelfTest.check(polls <= 3 * 5, "a long poll, not a tight one: " + polls + " requests in 3 s");
                }
                rs.stop();
            }
        });
    }

    // --- state handles ------------------------------------------------------------------------------

    /** A store of Strings on a fresh cluster whose lease this process holds. */
    final class Store implements AutoCloseable {
        final String cluster = cluster();
        final java.nio.file.Path dir;
        final HaApi api;
        final Leadership leadership = new Leadership(Leadership.newHolderId(), Duration.ofMinutes(1), Duration.ofSeconds(1));
        final JobstoreStateHandleStore<String> store;
        final HaApi.Lease held;
        final String job;

        Store(int retries, String replicas, String kind, String job) throws Exception {
            this.job = job;
            dir = Files.createTempDirectory("jobstore-ha-selftest");
            api = new HaApi(client(replicas, cluster, retries), leadership::suspect);
            HaApi lease = new HaApi(client(urls, cluster, 2), () -> {});
            held = lease.acquire(leadership.holder, leadership.lease, Duration.ofSeconds(2));
            leadership.lead(held, System.nanoTime() + leadership.lease.toNanos() / 2);
            store = new JobstoreStateHandleStore<>(
                    api, leadership, new FileSystemStateStorageHelper<>(new Path(dir.toUri()), "selftest"), kind, job);
        }

        int files() throws IOException {
            try (Stream<java.nio.file.Path> s = Files.list(dir)) {
                return (int) s.count();
            }
        }

        @Override
        public void close() throws IOException {
            try (Stream<java.nio.file.Path> s = Files.walk(dir)) {
                s.sorted(Collections.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private void stateHandles() {
        t.test("state handles: add (state in a file, pointer in jobstore), get, exists, list; adding twice ->"
                + " AlreadyExistException and the second state is discarded", () -> {
            try (Store s = new Store(2, urls, HaApi.EXECUTION_PLAN, null)) {
                PluginSelfTest.check(!s.store.exists("a").isExisting(), "absent");
                RetrievableStateHandle<String> h = s.store.addAndLock("a", "state of a");
                PluginSelfTest.checkEq("state of a", h.retrieveState(), "returned handle");
                PluginSelfTest.checkEq(IntegerResourceVersion.valueOf(1), s.store.exists("a"), "version 1");
                PluginSelfTest.checkEq("state of a", s.store.getAndLock("a").retrieveState(), "read back");
                s.store.addAndLock("b", "state of b");
                PluginSelfTest.checkEq(Arrays.asList("a", "b"), sorted(s.store.getAllHandles()), "names");
                PluginSelfTest.checkEq(Arrays.asList("state of a", "state of b"),
                        s.store.getAllAndLock().stream().map(x -> retrieve(x.f0)).sorted().collect(Collectors.toList()),
                        "states");
                PluginSelfTest.checkEq(2, s.files(), "files");
                PluginSelfTest.expect(StateHandleStore.AlreadyExistException.class, () -> s.store.addAndLock("a", "again"));
                PluginSelfTest.checkEq(2, s.files(), "the second state's file was discarded");
                PluginSelfTest.checkEq("state of a", s.store.getAndLock("a").retrieveState(), "a unchanged");
                PluginSelfTest.expect(StateHandleStore.NotExistException.class, () -> s.store.getAndLock("c"));
                // a pointer is a small serialized handle, far below jobstore's 64 KiB
                int size = s.api.getHandle(HaApi.EXECUTION_PLAN, null, "a").bytes.length;
                System.out.println("# state handle pointer: " + size + " bytes");
                PluginSelfTest.check(size < 4096, "pointer size " + size);
            }
        });

        t.test("state handles: replace is a compare-and-set on the version (old state discarded); a stale version ->"
                + " ConcurrentModificationException, the new state discarded, the entry unchanged", () -> {
            try (Store s = new Store(2, urls, HaApi.CHECKPOINT, new JobID().toHexString())) {
                s.store.addAndLock("cp", "v1");
                IntegerResourceVersion v1 = s.store.exists("cp");
                s.store.replace("cp", v1, "v2");
                PluginSelfTest.checkEq(IntegerResourceVersion.valueOf(2), s.store.exists("cp"), "version 2");
                PluginSelfTest.checkEq("v2", s.store.getAndLock("cp").retrieveState(), "new state");
                PluginSelfTest.checkEq(1, s.files(), "the old state's file was discarded");
                PluginSelfTest.expect(ConcurrentModificationException.class, () -> s.store.replace("cp", v1, "v3"));
                PluginSelfTest.checkEq("v2", s.store.getAndLock("cp").retrieveState(), "unchanged");
                PluginSelfTest.checkEq(1, s.files(), "the refused state's file was discarded");
                PluginSelfTest.expect(StateHandleStore.NotExistException.class,
                        () -> s.store.replace("absent", IntegerResourceVersion.valueOf(1), "x"));
                PluginSelfTest.checkEq(1, s.files(), "files after replacing an absent entry");
            }
        });

        t.test("state handles: an entry marked for deletion counts as absent (exists, get, list, replace); adding"
                + " it again finishes its removal first", () -> {
            try (Store s = new Store(2, urls, HaApi.APPLICATION, null)) {
                s.store.addAndLock("m", "marked");
                s.store.addAndLock("n", "kept");
                PluginSelfTest.checkEq(200, s.api.markForDeletion(s.held, HaApi.APPLICATION, null, "m").status, "marked");
                PluginSelfTest.check(!s.store.exists("m").isExisting(), "exists -> not existing");
                PluginSelfTest.expect(StateHandleStore.NotExistException.class, () -> s.store.getAndLock("m"));
                PluginSelfTest.checkEq(Collections.singletonList("n"), sorted(s.store.getAllHandles()), "names");
                PluginSelfTest.checkEq(1, s.store.getAllAndLock().size(), "handles");
                PluginSelfTest.expect(StateHandleStore.NotExistException.class,
                        () -> s.store.replace("m", IntegerResourceVersion.valueOf(1), "x"));
                PluginSelfTest.checkEq(2, s.files(), "files");
                s.store.addAndLock("m", "new");
                PluginSelfTest.checkEq("new", s.store.getAndLock("m").retrieveState(), "re-added");
                PluginSelfTest.checkEq(IntegerResourceVersion.valueOf(1), s.store.exists("m"), "a fresh entry");
                PluginSelfTest.checkEq(2, s.files(), "the marked entry's state was discarded");
            }
        });

        t.test("state handles: releaseAndTryRemove marks, discards the state, removes; it is idempotent and finishes"
                + " a removal interrupted after the mark; clearEntries removes pointers only", () -> {
            try (Store s = new Store(2, urls, HaApi.CHECKPOINT, new JobID().toHexString())) {
                s.store.addAndLock("x", "x");
                s.store.addAndLock("y", "y");
                PluginSelfTest.check(s.store.releaseAndTryRemove("x"), "removed");
                PluginSelfTest.check(s.api.getHandle(HaApi.CHECKPOINT, s.job, "x") == null, "entry gone");
                PluginSelfTest.checkEq(1, s.files(), "x's state discarded");
                PluginSelfTest.check(s.store.releaseAndTryRemove("x"), "second call: still true");
                PluginSelfTest.check(s.store.releaseAndTryRemove("never"), "absent: true");
                // interrupted after phase 1
                String job = s.job;
                s.api.markForDeletion(s.held, HaApi.CHECKPOINT, job, "y");
                PluginSelfTest.checkEq(1, s.files(), "y's state still there while only marked");
                PluginSelfTest.check(s.store.releaseAndTryRemove("y"), "finished");
                PluginSelfTest.checkEq(0, s.files(), "y's state discarded");
                PluginSelfTest.check(s.api.listHandles(HaApi.CHECKPOINT, job).isEmpty(), "no entries");
                s.store.addAndLock("z", "z");
                s.store.clearEntries();
                PluginSelfTest.check(s.api.listHandles(HaApi.CHECKPOINT, job).isEmpty(), "cleared");
                PluginSelfTest.checkEq(1, s.files(), "clearEntries leaves the state files");
            }
        });

        t.test("state handles: without the lease every write fails with NotLeaderException (the new state discarded)", () -> {
            try (Store s = new Store(2, urls, HaApi.EXECUTION_PLAN, null)) {
                s.store.addAndLock("a", "a");
                s.leadership.end();
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> s.store.addAndLock("b", "b"));
                PluginSelfTest.expect(HaApi.NotLeaderException.class,
                        () -> s.store.replace("a", IntegerResourceVersion.valueOf(1), "a2"));
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> s.store.releaseAndTryRemove("a"));
                PluginSelfTest.checkEq(1, s.files(), "only a's state");
                PluginSelfTest.checkEq("a", s.store.getAndLock("a").retrieveState(), "a unchanged");
            }
        });
    }

    private void stateHandleFaults() {
        t.test("state handles: an add whose answer is lost (no retries left) -> PossibleInconsistentStateException and"
                + " the state kept; the same with retries -> the retry finds its own entry: done; not sent at all ->"
                + " IOException, the state discarded", () -> {
            try (Store s = new Store(0, urls, HaApi.EXECUTION_PLAN, null)) {
                fake.fail("POST", "/state-handles/", FakeJobstore.Fault.APPLY_THEN_DROP, 1);
                PluginSelfTest.expect(PossibleInconsistentStateException.class, () -> s.store.addAndLock("lost", "lost"));
                PluginSelfTest.checkEq(1, s.files(), "state kept");
                PluginSelfTest.checkEq("lost", s.store.getAndLock("lost").retrieveState(), "it did land");
                fake.fail("PUT", "/state-handles/", FakeJobstore.Fault.APPLY_THEN_503, 1);
                PluginSelfTest.expect(PossibleInconsistentStateException.class,
                        () -> s.store.replace("lost", IntegerResourceVersion.valueOf(1), "lost2"));
                PluginSelfTest.checkEq(2, s.files(), "old and new state kept");
            }
            try (Store s = new Store(2, urls, HaApi.EXECUTION_PLAN, null)) {
                fake.fail("POST", "/state-handles/", FakeJobstore.Fault.APPLY_THEN_DROP, 1);
                s.store.addAndLock("retried", "r1");
                PluginSelfTest.checkEq(1, s.files(), "one state");
                PluginSelfTest.checkEq("r1", s.store.getAndLock("retried").retrieveState(), "landed once");
                fake.fail("PUT", "/state-handles/", FakeJobstore.Fault.APPLY_THEN_503, 1);
                s.store.replace("retried", IntegerResourceVersion.valueOf(1), "r2");
                PluginSelfTest.checkEq("r2", s.store.getAndLock("retried").retrieveState(), "replaced");
                PluginSelfTest.checkEq(IntegerResourceVersion.valueOf(2), s.store.exists("retried"), "version 2");
                PluginSelfTest.checkEq(1, s.files(), "old state discarded after the recognised retry");
            }
            try (Store s = new Store(1, closedPortUrl() + "," + closedPortUrl(), HaApi.EXECUTION_PLAN, null)) {
                Exception e = PluginSelfTest.expect(Exception.class, () -> s.store.addAndLock("down", "down"));
                PluginSelfTest.check(e instanceof IOException && !(e instanceof PossibleInconsistentStateException),
                        "an IOException, not a possible inconsistency: " + e);
                PluginSelfTest.checkEq(0, s.files(), "state discarded");
            }
        });
    }

    private void pagedListing() {
        if (fake == null) {
            t.test("state handles: a listing past one page (80 handles of 60000 bytes: jobstore cuts a page after"
                    + " 4 MiB) -> every entry once, in name order", () -> {
                try (Store s = new Store(2, urls, HaApi.CHECKPOINT, new JobID().toHexString())) {
                    List<String> names = new ArrayList<>();
                    for (int i = 0; i < 80; i++) {
                        String name = String.format("cp-%02d", i);
                        names.add(name);
                        byte[] big = new byte[60_000];
                        Arrays.fill(big, (byte) i);
                        s.api.addHandle(s.held, HaApi.CHECKPOINT, s.job, name, big);
                    }
                    // A page is 4 MiB of base64: a slow disk or a busy machine can take longer than
                    // the 2 s the other checks give an answer, so the listing has 20 s.
                    HaApi patient = new HaApi(client(urls, s.cluster, 2, Duration.ofSeconds(20)), () -> {});
                    List<HaApi.Handle> all = patient.listHandles(HaApi.CHECKPOINT, s.job);
                    PluginSelfTest.checkEq(names, all.stream().map(h -> h.name).collect(Collectors.toList()), "names");
                    PluginSelfTest.check(all.stream().allMatch(h -> h.bytes.length == 60_000), "every handle whole");
                    PluginSelfTest.checkEq(79, (int) all.get(79).bytes[0], "the last handle's bytes");
                }
            });
            return;
        }
        t.test("state handles: a listing of several pages (the fake's pages hold 2 handles) -> every entry once, in"
                + " name order; other jobs' entries are not listed", () -> {
            try (Store s = new Store(2, urls, HaApi.CHECKPOINT, new JobID().toHexString())) {
                List<String> names = new ArrayList<>();
                for (int i = 0; i < 7; i++) {
                    names.add("cp-" + i);
                    s.api.addHandle(s.held, HaApi.CHECKPOINT, s.job, "cp-" + i, new byte[] {(byte) i});
                }
                s.api.addHandle(s.held, HaApi.CHECKPOINT, new JobID().toHexString(), "cp-other", new byte[] {9});
                fake.ha.pageCap(2);
                try {
                    long before = fake.ha.pages();
                    List<HaApi.Handle> all = s.api.listHandles(HaApi.CHECKPOINT, s.job);
                    PluginSelfTest.checkEq(names, all.stream().map(h -> h.name).collect(Collectors.toList()), "names");
                    PluginSelfTest.checkEq(4L, fake.ha.pages() - before, "pages (2 + 2 + 2 + 1)");
                    PluginSelfTest.checkEq(6, (int) all.get(6).bytes[0], "the last page's handle");
                    PluginSelfTest.checkEq(names, sorted(s.store.getAllHandles()), "the store's names");
                } finally {
                    fake.ha.pageCap(Integer.MAX_VALUE);
                }
            }
        });
    }

    private static List<String> sorted(java.util.Collection<String> names) {
        List<String> l = new ArrayList<>(names);
        Collections.sort(l);
        return l;
    }

    private static String retrieve(RetrievableStateHandle<String> h) {
        try {
            return h.retrieveState();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    // --- counter --------------------------------------------------------------------------------------

    private void counter() {
        t.test("counter: 32 threads x 20 concurrent getAndIncrement hand out 640 distinct ids 1..640" + (fake == null ? "" : " (with lost answers: distinct, none repeated)")
                + "; get, setCount; removed on a globally terminal state only; fenced without the lease", () -> {
            try (Store s = new Store(3, urls, HaApi.CHECKPOINT, null)) {
                JobID job = new JobID();
                CheckpointIDCounter counter = new JobstoreCheckpointIDCounter(s.api, s.leadership, job, io);
                counter.start();
                PluginSelfTest.checkEq((long) CheckpointIDCounter.INITIAL_CHECKPOINT_ID, counter.get(), "initial");
                ExecutorService pool = Executors.newFixedThreadPool(32);
                try {
                    List<Callable<List<Long>>> calls = new ArrayList<>();
                    for (int i = 0; i < 32; i++) {
                        calls.add(() -> {
                            List<Long> got = new ArrayList<>();
                            for (int k = 0; k < 20; k++) {
                                got.add(counter.getAndIncrement());
                            }
                            return got;
                        });
                    }
                    List<Long> all = new ArrayList<>();
                    for (Future<List<Long>> f : pool.invokeAll(calls)) {
                        all.addAll(f.get());
                    }
                    Set<Long> distinct = new HashSet<>(all);
                    PluginSelfTest.checkEq(640, distinct.size(), "distinct ids of " + all.size());
                    PluginSelfTest.checkEq(1L, Collections.min(all), "first id");
                    PluginSelfTest.checkEq(640L, Collections.max(all), "last id");
                    PluginSelfTest.checkEq(641L, counter.get(), "next");
                    if (fake != null) {
                        fake.fail("POST", "/get-and-increment", FakeJobstore.Fault.APPLY_THEN_503, 20);
                        List<Long> more = new ArrayList<>();
                        for (Future<List<Long>> f : pool.invokeAll(calls.subList(0, 8))) {
                            more.addAll(f.get());
                        }
                        more.addAll(all);
                        PluginSelfTest.checkEq(more.size(), new HashSet<>(more).size(), "no id handed out twice after lost answers");
                        PluginSelfTest.check(counter.get() > Collections.max(more), "next beyond every id");
                    }
                } finally {
                    pool.shutdownNow();
                }
                counter.setCount(5000);
                PluginSelfTest.checkEq(5000L, counter.get(), "after setCount");
                PluginSelfTest.checkEq(5000L, counter.getAndIncrement(), "hands out the set value");
                counter.shutdown(JobStatus.SUSPENDED).get();
                PluginSelfTest.checkEq(5001L, counter.get(), "kept when suspended");
                counter.shutdown(JobStatus.CANCELED).get();
                PluginSelfTest.check(s.api.counter(job.toHexString()) == null, "removed when canceled");
                PluginSelfTest.checkEq((long) CheckpointIDCounter.INITIAL_CHECKPOINT_ID, counter.get(), "initial again");
                s.leadership.end();
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> counter.getAndIncrement());
                PluginSelfTest.expect(HaApi.NotLeaderException.class, () -> counter.setCount(3));
            }
        });
    }

    // --- Flink's services over all of it --------------------------------------------------------------

    /** Records grants of a LeaderContender. */
    static final class Contender implements LeaderContender {
        volatile UUID session;
        final List<String> events = Collections.synchronizedList(new ArrayList<>());

        @Override
        public void grantLeadership(UUID s) {
            session = s;
            events.add("grant");
        }

        @Override
        public void revokeLeadership() {
            session = null;
            events.add("revoke");
        }

        @Override
        public void handleError(Exception e) {
            events.add("error " + e);
        }
    }

    private Configuration jobstoreMode(String cluster, java.nio.file.Path storage) {
        Configuration c = new Configuration();
        c.set(HighAvailabilityOptions.HA_MODE, JobstoreHaServicesFactory.class.getName());
        c.set(HighAvailabilityOptions.HA_CLUSTER_ID, cluster);
        c.set(HighAvailabilityOptions.HA_STORAGE_PATH, storage.toUri().toString());
        c.set(JobstoreOptions.MODE, "jobstore");
        c.set(JobstoreOptions.URL, urls);
        if (token != null) {
            c.set(JobstoreOptions.TOKEN, token);
        }
        c.set(JobstoreOptions.LEASE_DURATION, LEASE);
        c.set(JobstoreOptions.RENEW_INTERVAL, RENEW);
        c.set(JobstoreOptions.RETRY_BACKOFF, Duration.ofMillis(20));
        return c;
    }

    private void flinkServices() {
        clusterCase("Flink's services (jobstore mode from the factory): Flink's DefaultLeaderElectionService grants one of"
                + " two JobManagers; its confirmed address reaches the other's retriever and a client's; overwritten"
                + " leader information is published again; an execution plan, an application and the checkpoint counter survive the"
                + " takeover; job cleanup and cluster cleanup remove the HA data", cluster -> {
            java.nio.file.Path storage = Files.createTempDirectory("jobstore-ha-storage");
            Configuration conf = jobstoreMode(cluster, storage);
            JobstoreHaServicesFactory factory = new JobstoreHaServicesFactory();
            HighAvailabilityServices s1 = factory.createHAServices(conf, io);
            HighAvailabilityServices s2 = factory.createHAServices(conf, io);
            ClientHighAvailabilityServices client = factory.createClientHAServices(conf);
            try {
                PluginSelfTest.check(s1 instanceof JobstoreLeaderElectionHaServices, "type " + s1.getClass());
                PluginSelfTest.check(s1.getJobResultStore() instanceof JobstoreJobResultStore, "job results in jobstore");
                PluginSelfTest.check(s1.getApplicationResultStore() instanceof JobstoreApplicationResultStore, "application results");
                Contender c1 = new Contender();
                Contender c2 = new Contender();
                LeaderElection d1 = s1.getDispatcherLeaderElection();
                LeaderElection d2 = s2.getDispatcherLeaderElection();
                LeaderElection r1 = s1.getClusterRestEndpointLeaderElection();
                Contender rest1 = new Contender();
                d1.startLeaderElection(c1);
                r1.startLeaderElection(rest1);
                waitFor("s1's dispatcher granted", 10_000, () -> c1.session != null && rest1.session != null);
                d2.startLeaderElection(c2);
                UUID session1 = c1.session;
                d1.confirmLeadershipAsync(session1, "pekko://jm1/dispatcher").get();
                r1.confirmLeadershipAsync(rest1.session, "http://jm1:8081").get();

                Seen fromS2 = new Seen();
                LeaderRetrievalService retriever = s2.getDispatcherLeaderRetriever();
                retriever.start(fromS2);
                waitFor("s2 sees s1's dispatcher", 5_000, () -> ("pekko://jm1/dispatcher/" + session1).equals(fromS2.last()));
                Seen fromClient = new Seen();
                LeaderRetrievalService restRetriever = client.getClusterRestEndpointLeaderRetriever();
                restRetriever.start(fromClient);
                waitFor("the client sees s1's REST endpoint", 5_000,
                        () -> ("http://jm1:8081/" + rest1.session).equals(fromClient.last()));
                PluginSelfTest.checkEq(Collections.emptyList(), c2.events, "s2 waits");

                JobstoreLeaderElectionHaServices.Backend b1 = ((JobstoreLeaderElectionHaServices) s1).backend();
                b1.api.publishLeaderInfo(b1.leadership.currentLease(), "dispatcher", "pekko://intruder", UUID.randomUUID().toString());
                waitFor("the confirmed information published again", 5_000, () -> {
                    try {
                        return "pekko://jm1/dispatcher".equals(listing(b1.api).records.get("dispatcher").address);
                    } catch (IOException e) {
                        return false;
                    }
                });

                JobID job = new JobID();
                ExecutionPlanStore plans1 = s1.getExecutionPlanStore();
                plans1.start(NO_LISTENER);
                plans1.putExecutionPlan(new JobGraph(job, "ha-selftest"));
                PluginSelfTest.checkEq(Collections.singletonList(job), new ArrayList<>(plans1.getJobIds()), "job ids");
                CheckpointRecoveryFactory checkpoints1 = s1.getCheckpointRecoveryFactory();
                CheckpointIDCounter counter1 = checkpoints1.createCheckpointIDCounter(job);
                PluginSelfTest.checkEq(1L, counter1.getAndIncrement(), "first checkpoint id");
                PluginSelfTest.checkEq(0, checkpoints1.createRecoveredCompletedCheckpointStore(
                                job, 1, SharedStateRegistry.DEFAULT_FACTORY, io, RecoveryClaimMode.DEFAULT)
                        .getNumberOfRetainedCheckpoints(), "no completed checkpoints yet");
                plans1.stop();
                ApplicationStore apps1 = s1.getApplicationStore();
                apps1.start();
                ApplicationID app = new ApplicationID();
                apps1.putApplication(new TestApplication(app, "ha-selftest-app"));
                PluginSelfTest.checkEq(Collections.singletonList(app), new ArrayList<>(apps1.getApplicationIds()), "application ids");
                apps1.stop();

                long closed = System.nanoTime();
                r1.close();
                d1.close();
                waitFor("s2's dispatcher granted after s1 left", 5_000, () -> c2.session != null);
                System.out.println("# takeover after a clean shutdown: "
                        + (System.nanoTime() - closed) / 1_000_000 + " ms (lease " + LEASE.toMillis() + " ms)");
                PluginSelfTest.checkEq(Collections.singletonList("grant"), c2.events, "s2's contender events");
                d2.confirmLeadershipAsync(c2.session, "pekko://jm2/dispatcher").get();
                UUID session2 = c2.session;
                waitFor("s2's own retriever follows", 5_000, () -> ("pekko://jm2/dispatcher/" + session2).equals(fromS2.last()));

                ExecutionPlanStore plans2 = s2.getExecutionPlanStore();
                plans2.start(NO_LISTENER);
                PluginSelfTest.checkEq(Collections.singletonList(job), new ArrayList<>(plans2.getJobIds()), "recovered job ids");
                ExecutionPlan recovered = plans2.recoverExecutionPlan(job);
                PluginSelfTest.checkEq(job, recovered.getJobID(), "recovered plan");
                PluginSelfTest.checkEq("ha-selftest", recovered.getName(), "plan name");
                ApplicationStore apps2 = s2.getApplicationStore();
                apps2.start();
                PluginSelfTest.checkEq("ha-selftest-app", apps2.recoverApplication(app).get().getName(), "recovered application");
                apps2.globalCleanupAsync(app, io).get();
                PluginSelfTest.check(apps2.getApplicationIds().isEmpty(), "application removed");
                apps2.stop();
                CheckpointIDCounter counter2 = s2.getCheckpointRecoveryFactory().createCheckpointIDCounter(job);
                PluginSelfTest.checkEq(2L, counter2.get(), "the counter continues");

                plans2.globalCleanupAsync(job, io).get();
                s2.globalCleanupAsync(job, io).get();
                JobstoreLeaderElectionHaServices.Backend b2 = ((JobstoreLeaderElectionHaServices) s2).backend();
                PluginSelfTest.check(b2.api.counter(job.toHexString()) == null, "counter removed by the job cleanup");
                PluginSelfTest.check(plans2.getJobIds().isEmpty(), "plan removed");
                plans2.stop();

                Exception e = PluginSelfTest.expect(Exception.class, () -> s1.cleanupAllData());
                PluginSelfTest.check(String.valueOf(e.getMessage()).contains("another JobManager holds")
                        || String.valueOf(e.getCause()).contains("another JobManager holds"), "s1 may not clean up: " + e);
                retriever.stop();
                d2.close();
                s2.cleanupAllData();
                PluginSelfTest.check(listing(b2.api).records.isEmpty(), "no leader information left: " + listing(b2.api).records);
                PluginSelfTest.check(b2.api.listHandles(HaApi.EXECUTION_PLAN, null).isEmpty(), "no execution plans left");
                restRetriever.stop();
            } finally {
                client.close();
                s1.close();
                s2.close();
                try (Stream<java.nio.file.Path> s = Files.walk(storage)) {
                    s.sorted(Collections.reverseOrder()).forEach(p -> p.toFile().delete());
                }
            }
        });
    }

    /** An application as the application store keeps it (Flink only asks it for its id and name here). */
    static final class TestApplication implements ApplicationStoreEntry {
        private static final long serialVersionUID = 1L;
        private final ApplicationID id;
        private final String name;

        TestApplication(ApplicationID id, String name) {
            this.id = id;
            this.name = name;
        }

        @Override
        public AbstractApplication getApplication(
                PermanentBlobService blobs, Collection<JobInfo> recovered, Collection<JobInfo> terminated) {
            throw new UnsupportedOperationException("not run in the self-test");
        }

        @Override
        public ApplicationID getApplicationId() {
            return id;
        }

        @Override
        public String getName() {
            return name;
        }
    }

    private static final ExecutionPlanStore.ExecutionPlanListener NO_LISTENER =
            new ExecutionPlanStore.ExecutionPlanListener() {
                @Override
                public void onAddedExecutionPlan(JobID jobId) {}

                @Override
                public void onRemovedExecutionPlan(JobID jobId) {}
            };

    public static void main(String[] args) throws Exception {
        PluginSelfTest t = new PluginSelfTest();
        HaSelfTest ha = new HaSelfTest(t);
        if (args.length >= 1 && args[0].equals("--fake")) {
            t.runThenExit(() -> {
                try (FakeJobstore fake = new FakeJobstore()) {
                    ha.runAgainstFake(fake);
                }
            });
        } else if (args.length >= 2 && args[0].equals("--url")) {
            t.runThenExit(() -> ha.runAgainstJobstore(args[1], args.length >= 4 && args[2].equals("--token") ? args[3] : null));
        } else {
            System.err.println("usage: HaSelfTest --fake | --url URL [--token T]");
            System.exit(2);
        }
    }
}
