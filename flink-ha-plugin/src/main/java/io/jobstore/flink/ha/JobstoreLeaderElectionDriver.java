package io.jobstore.flink.ha;

import org.apache.flink.runtime.leaderelection.LeaderElectionDriver;
import org.apache.flink.runtime.leaderelection.LeaderInformation;
import org.apache.flink.runtime.leaderelection.LeaderInformationRegister;
import org.apache.flink.util.concurrent.ExecutorThreadFactory;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * The leader election of one JobManager process, on its cluster's lease in jobstore. One driver
 * serves every component of the process (resource manager, dispatcher, REST endpoint, jobs).
 *
 * <p>One thread (the lease loop) acquires the lease, renews it every {@code renew-interval}, and
 * tells the listener: {@code onGrantLeadership} with a fresh session id at every acquisition,
 * {@code onRevokeLeadership} when jobstore answers that the lease is lost, or when no renewal got
 * through before the term's deadline (a margin before the lease can expire in jobstore); then it
 * tries to acquire the lease again. Grants and revocations come from that one thread, so they
 * strictly alternate. A standby whose acquisition was refused waits for the lease in jobstore
 * rather than for a renew interval: the refusal says how long the live lease has left, and the
 * long poll of the lease ({@code GET .../ha/lease}) answers at its expiry or at once when it is
 * released or changes hands; the standby tries again right then. Against a jobstore that does not
 * say (or when the poll fails), it tries again after a renew interval.
 * A term is one acquisition of the lease, named by its lease id (jobstore draws a
 * new one at every acquisition): the process never leads twice on the same lease id. An epoch may
 * repeat with a new lease id (a database failover lost the commit of an acquisition); that is a new
 * term, and the writes of the lost one are fenced by their lease id.
 *
 * <p>Leader information is written by a second thread, in the order Flink asked for it, each
 * write naming the lease of the term it was asked in (jobstore refuses it once that lease is not
 * the live one); a write that fails is retried while that term lasts. Changes of the stored
 * leader information (the process's shared long poll, {@link LeaderInfoWatcher}) are reported to
 * the listener while the process leads, so that information overwritten or deleted by others is
 * published again. {@link #close()} releases the lease.
 */
final class JobstoreLeaderElectionDriver implements LeaderElectionDriver {

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreLeaderElectionDriver.class);

    /** How many lease ids of earlier terms the lease loop remembers (the newest ones). */
    static final int LEASE_IDS_REMEMBERED = 1024;

    /** How long after the live lease's expiry (as jobstore told it) a standby's wait ends at most. */
    static final long EXPIRY_MARGIN_MS = 25;

    /** A standby's long poll ends this much before the client's timeout (at most a second). */
    static final long POLL_MARGIN_MS = 1000;

    private final HaApi leaseApi;
    private final HaApi api;
    private final Leadership leadership;
    private final Listener listener;
    private final Duration attemptTimeout;
    /** The configured timeout of one request ({@code jobstore.timeout}): a renewal's longest. */
    private final Duration requestTimeout;
    private final Thread leaseLoop;
    private final ExecutorService writer;
    private final AutoCloseable subscription;

    private final Object monitor = new Object();
    /** Guarded by monitor. */
    private boolean running = true;
    /** Guarded by monitor: check the lease now (a write met a stale lease). */
    private boolean checkNow;

    // State of the lease loop (its thread only).
    /** The lease of the current term, null between terms. */
    private HaApi.Lease lease;
    /** The lease ids of the terms this process led (the newest {@link #LEASE_IDS_REMEMBERED}). */
    private final Set<String> leaseIdsLed = new LinkedHashSet<>();
    /** Standby: what the last refused acquisition said the live lease has left (ms); -1: nothing. */
    private long heldForMs = -1;
    /** Standby: the ETag of the lease as last polled (null: none yet, or the poll failed). */
    private String leaseTag;
    private long deadlineNanos;
    private long nextRenewalNanos;
    private int failedRenewals;

    /**
     * @param leaseApi the routes on a client whose attempts time out within a renew interval
     * @param api the routes for leader information, with the configured retries
     */
    JobstoreLeaderElectionDriver(
            HaApi leaseApi, HaApi api, Leadership leadership, LeaderInfoWatcher watcher, Listener listener) {
        this.leaseApi = leaseApi;
        this.api = api;
        this.leadership = leadership;
        this.listener = listener;
        this.attemptTimeout = leaseApi.client().timeout();
        this.requestTimeout = api.client().timeout();
        leadership.onSuspicion(this::checkLeaseNow);
        this.writer =
                Executors.newSingleThreadExecutor(
                        new ExecutorThreadFactory("jobstore-ha-leader-info-" + api.clusterId()));
        this.leaseLoop = new Thread(this::runLeaseLoop, "jobstore-ha-lease-" + api.clusterId());
        this.leaseLoop.setDaemon(true);
        this.subscription = watcher.subscribe(this::onStoredLeaderInformation);
        this.leaseLoop.start();
        LOG.info(
                "Competing for the leadership of cluster {} in jobstore as {} (lease {}, renewed every {}).",
                api.clusterId(),
                leadership.holder,
                leadership.lease,
                leadership.renewInterval);
    }

    @Override
    public boolean hasLeadership() {
        return leadership.isLeader();
    }

    @Override
    public void publishLeaderInformation(String componentId, LeaderInformation info) {
        HaApi.Lease term = leadership.currentLease();
        if (term == null) {
            LOG.debug("Not publishing the leader information of {}: not the leader.", componentId);
            return;
        }
        write(term, componentId, info);
    }

    @Override
    public void deleteLeaderInformation(String componentId) {
        HaApi.Lease term = leadership.currentLease();
        if (term != null) {
            write(term, componentId, LeaderInformation.empty());
        }
    }

    private void write(HaApi.Lease term, String componentId, LeaderInformation info) {
        try {
            writer.execute(() -> writeWhileLeading(term, componentId, info));
        } catch (RejectedExecutionException e) {
            LOG.debug("Not writing the leader information of {}: the driver is closed.", componentId);
        }
    }

    /** Writes (or, for empty information, deletes) until done, fenced, or the term is over. */
    private void writeWhileLeading(HaApi.Lease term, String componentId, LeaderInformation info) {
        Backoff pause = api.client().backoff(10);
        while (isRunning() && term.equals(leadership.currentLease())) {
            try {
                if (info.isEmpty()) {
                    api.deleteLeaderInfo(term, componentId);
                } else {
                    api.publishLeaderInfo(
                            term, componentId, info.getLeaderAddress(), info.getLeaderSessionID().toString());
                }
                LOG.debug("{} leader information of {} ({}).", info.isEmpty() ? "Deleted" : "Published", componentId, term);
                return;
            } catch (HaApi.NotLeaderException e) {
                LOG.info("jobstore refused the leader information of {} of {}: {}", componentId, term, e.getMessage());
                return;
            } catch (IOException e) {
                LOG.warn("Could not write the leader information of {} ({}); retrying while leading.", componentId, term, e);
            }
            try {
                Thread.sleep(pause.next());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** A new listing of the stored leader information (on the watcher's thread). */
    private void onStoredLeaderInformation(HaApi.Listing listing) {
        if (!isRunning() || !leadership.isLeader()) {
            return;
        }
        Map<String, LeaderInformation> stored = new HashMap<>();
        for (HaApi.LeaderRecord r : listing.records.values()) {
            stored.put(r.component, LeaderInfoWatcher.information(r));
        }
        listener.onLeaderInformationChange(new LeaderInformationRegister(stored));
    }

    // --- the lease loop -------------------------------------------------------------------------

    private void runLeaseLoop() {
        try {
            while (isRunning()) {
                if (lease == null) {
                    if (!tryAcquire()) {
                        awaitLease();
                    }
                } else {
                    renewOrRevoke();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException | Error e) {
            LOG.error("The jobstore lease loop of cluster {} failed.", api.clusterId(), e);
            if (lease != null) {
                revoke("the lease loop failed: " + e);
            }
            listener.onError(e);
        }
    }

    /** Acquisition attempts; true when the process leads afterwards. */
    private boolean tryAcquire() throws InterruptedException {
        for (int attempt = 0; attempt < 3 && isRunning(); attempt++) {
            long sent = System.nanoTime();
            HaApi.Lease acquired = acquireOnce();
            if (acquired == null) {
                return false;
            }
            if (leaseIdsLed.contains(acquired.leaseId)) {
                // Our own lease of an earlier term is still live in jobstore (a renewal landed
                // but was not answered in time, or a database failover brought an older lease
                // row back): give it up, so that the new term gets a new lease id. The epoch
                // does not tell: a lost commit can hand an epoch out twice, a lease id never.
                LOG.info("Releasing the leader lease of cluster {} of an earlier term ({}).", api.clusterId(), acquired);
                release(acquired);
                continue;
            }
            long deadline = leadership.deadlineAfter(sent);
            if (System.nanoTime() - deadline >= 0) {
                // The answer came too late to act on it; asking again renews the same lease.
                LOG.info("The lease of cluster {} ({}) was granted too late to lead on it; asking again.",
                        api.clusterId(), acquired);
                continue;
            }
            if (!isRunning()) {
                release(acquired);
                return false;
            }
            lead(acquired, sent, deadline);
            return true;
        }
        return false;
    }

    private void lead(HaApi.Lease acquired, long sent, long deadline) {
        lease = acquired;
        leaseIdsLed.add(acquired.leaseId);
        if (leaseIdsLed.size() > LEASE_IDS_REMEMBERED) {
            leaseIdsLed.remove(leaseIdsLed.iterator().next());
        }
        deadlineNanos = deadline;
        nextRenewalNanos = sent + leadership.renewInterval.toNanos();
        leadership.lead(acquired, deadline);
        UUID session = UUID.randomUUID();
        LOG.info(
                "JobManager {} leads cluster {} now: epoch {}, lease {}, leader session {}.",
                leadership.holder,
                api.clusterId(),
                acquired.epoch,
                shortId(acquired),
                session);
        listener.onGrantLeadership(session);
    }

    /** The lease acquired, or null (held by another JobManager, or jobstore did not answer). */
    private HaApi.Lease acquireOnce() throws InterruptedException {
        heldForMs = -1;
        try {
            HaApi.Acquisition a = leaseApi.tryAcquire(leadership.holder, leadership.lease, attemptTimeout);
            if (a.lease == null) {
                heldForMs = a.heldForMs;
                LOG.debug("The leader lease of cluster {} is held by another JobManager ({} ms left).",
                        api.clusterId(), a.heldForMs);
            }
            return a.lease;
        } catch (IOException e) {
            interruptedCheck(e);
            LOG.warn("Could not try to acquire the leader lease of cluster {}: {}", api.clusterId(), e.getMessage());
            return null;
        }
    }

    /**
     * A standby's wait before it tries again: until the live lease expires, is released or changes
     * hands (the long poll of the lease, on the client's timeout), when the refusal said how long it
     * has left; otherwise (an older jobstore, no answer, or the poll failed) a renew interval.
     */
    private void awaitLease() throws InterruptedException {
        long heldFor = heldForMs;
        heldForMs = -1;
        if (heldFor < 0 || !isRunning()) {
            pauseUntil(System.nanoTime() + leadership.renewInterval.toNanos(), false);
            return;
        }
        Duration timeout = api.client().timeout();
        long cap = timeout.toMillis() - Math.min(POLL_MARGIN_MS, timeout.toMillis() / 4);
        try {
            if (leaseTag == null) {
                // The first wait: the lease's tag, at once.
                HaApi.LeaseState now = api.pollLease(null, Duration.ZERO, timeout);
                if (now.etag == null) {
                    throw new IOException("jobstore answered the lease without an ETag");
                }
                leaseTag = now.etag;
                if (!now.live) {
                    return;
                }
                heldFor = now.expiresInMs;
            }
            long wait = Math.max(0, Math.min(heldFor + EXPIRY_MARGIN_MS, cap));
            HaApi.LeaseState changed = api.pollLease(leaseTag, Duration.ofMillis(wait), timeout);
            if (changed != null) {
                leaseTag = changed.etag;
                LOG.debug("The leader lease of cluster {} changed: {}; trying to acquire it.", api.clusterId(), changed);
            }
        } catch (IOException e) {
            interruptedCheck(e);
            leaseTag = null;
            LOG.debug("Could not wait for the leader lease of cluster {} ({}); trying again in {}.",
                    api.clusterId(), e.getMessage(), leadership.renewInterval);
            pauseUntil(System.nanoTime() + leadership.renewInterval.toNanos(), false);
        }
    }

    private void renewOrRevoke() throws InterruptedException {
        long now = System.nanoTime();
        if (now - deadlineNanos >= 0) {
            revoke(
                    "no renewal of the lease got through within "
                            + leadership.lease.minus(leadership.margin())
                            + " (lease "
                            + leadership.lease
                            + ")");
            return;
        }
        if (now - nextRenewalNanos < 0 && !takeCheckNow()) {
            pauseUntil(Math.min(nextRenewalNanos, deadlineNanos), true);
            return;
        }
        // An attempt ends by the deadline: a hanging replica cannot keep the loop past it. Within
        // that and the configured timeout, it may take a renew interval or half of the time left,
        // whichever is longer: a jobstore that answers slower than a short renew interval (a
        // loaded machine) still renews, and a hanging replica leaves time for another attempt.
        long toDeadline = deadlineNanos - now;
        long bound = Math.min(toDeadline, Math.min(requestTimeout.toNanos(),
                Math.max(leadership.renewInterval.toNanos(), toDeadline / 2)));
        Duration timeout = Duration.ofNanos(Math.max(1_000_000L, bound));
        try {
            if (leaseApi.renew(leadership.holder, lease, leadership.lease, timeout)) {
                deadlineNanos = leadership.deadlineAfter(now);
                nextRenewalNanos = now + leadership.renewInterval.toNanos();
                leadership.lead(lease, deadlineNanos);
            } else {
                revoke("jobstore answered that the lease " + shortId(lease) + " of epoch " + lease.epoch
                        + " is no longer held");
            }
        } catch (IOException e) {
            interruptedCheck(e);
            // The first retry on each replica goes out at once (a dead replica costs one refused
            // connection); then a fifth of the renew interval between attempts, 50 ms to 1 s.
            long pause =
                    failedRenewals + 1 < leaseApi.client().baseUrls().size()
                            ? 0
                            : Math.max(50_000_000L, Math.min(leadership.renewInterval.toNanos() / 5, 1_000_000_000L));
            long left = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
            if (failedRenewals++ == 0) {
                LOG.warn(
                        "Could not renew the leader lease of cluster {} ({}): {}; retrying, leadership is"
                                + " given up in {} ms unless a renewal gets through.",
                        api.clusterId(), lease, e.getMessage(), left);
            } else {
                LOG.debug("Renewal {} of the leader lease of cluster {} failed ({} ms left): {}",
                        failedRenewals, api.clusterId(), left, e.getMessage());
            }
            nextRenewalNanos = System.nanoTime() + pause;
            return;
        }
        if (failedRenewals > 0) {
            LOG.info("Renewed the leader lease of cluster {} ({}) after {} failed attempt(s).",
                    api.clusterId(), lease, failedRenewals);
            failedRenewals = 0;
        }
    }

    private void revoke(String reason) {
        HaApi.Lease ended = lease;
        failedRenewals = 0;
        leadership.end();
        lease = null;
        LOG.warn("JobManager {} gives up the leadership of cluster {} (epoch {}): {}.", leadership.holder,
                api.clusterId(), ended.epoch, reason);
        listener.onRevokeLeadership();
    }

    private void release(HaApi.Lease term) {
        try {
            leaseApi.release(leadership.holder, term, attemptTimeout);
        } catch (IOException e) {
            LOG.info("Could not release the leader lease of cluster {} ({}): {}", api.clusterId(), term, e.getMessage());
        }
    }

    /** The first 8 characters of a lease id: enough to tell terms apart in logs. */
    private static String shortId(HaApi.Lease l) {
        return l.leaseId.substring(0, Math.min(8, l.leaseId.length()));
    }

    private static void interruptedCheck(IOException e) throws InterruptedException {
        if (Thread.currentThread().isInterrupted()) {
            InterruptedException ie = new InterruptedException("interrupted");
            ie.initCause(e);
            throw ie;
        }
    }

    /** Waits until the time (System.nanoTime), a close, or (when asked) a request to check now. */
    private void pauseUntil(long nanos, boolean wakeOnCheck) throws InterruptedException {
        synchronized (monitor) {
            while (running && !(wakeOnCheck && checkNow)) {
                long left = nanos - System.nanoTime();
                if (left <= 0) {
                    return;
                }
                TimeUnit.NANOSECONDS.timedWait(monitor, left);
            }
        }
    }

    private void checkLeaseNow() {
        synchronized (monitor) {
            checkNow = true;
            monitor.notifyAll();
        }
    }

    private boolean takeCheckNow() {
        synchronized (monitor) {
            boolean was = checkNow;
            checkNow = false;
            return was;
        }
    }

    private boolean isRunning() {
        synchronized (monitor) {
            return running;
        }
    }

    @Override
    public void close() throws Exception {
        synchronized (monitor) {
            if (!running) {
                return;
            }
            running = false;
            monitor.notifyAll();
        }
        subscription.close();
        writer.shutdownNow();
        leaseLoop.interrupt();
        leaseLoop.join(TimeUnit.SECONDS.toMillis(10) + attemptTimeout.toMillis());
        HaApi.Lease term = lease;
        if (leaseLoop.isAlive()) {
            LOG.warn("The jobstore lease loop of cluster {} did not stop in time.", api.clusterId());
            term = leadership.currentLease();
        }
        leadership.end();
        if (term != null) {
            release(term);
            LOG.info("Released the leader lease of cluster {} ({}).", api.clusterId(), term);
        }
        writer.awaitTermination(attemptTimeout.toMillis(), TimeUnit.MILLISECONDS);
    }

    @Override
    public String toString() {
        return "JobstoreLeaderElectionDriver{cluster=" + api.clusterId() + ", holder=" + leadership.holder + "}";
    }
}
