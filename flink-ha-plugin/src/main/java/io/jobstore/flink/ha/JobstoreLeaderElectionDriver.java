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
import java.util.Map;
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
 * strictly alternate. An acquisition never reuses an epoch this process led with before.
 *
 * <p>Leader information is written by a second thread, in the order Flink asked for it, each
 * write naming the epoch of the term it was asked in (jobstore refuses it once that epoch is not
 * the live lease); a write that fails is retried while that term lasts. Changes of the stored
 * leader information (the process's shared long poll, {@link LeaderInfoWatcher}) are reported to
 * the listener while the process leads, so that information overwritten or deleted by others is
 * published again. {@link #close()} releases the lease.
 */
final class JobstoreLeaderElectionDriver implements LeaderElectionDriver {

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreLeaderElectionDriver.class);

    private final HaApi leaseApi;
    private final HaApi api;
    private final Leadership leadership;
    private final Listener listener;
    private final Duration attemptTimeout;
    private final Thread leaseLoop;
    private final ExecutorService writer;
    private final AutoCloseable subscription;

    private final Object monitor = new Object();
    /** Guarded by monitor. */
    private boolean running = true;
    /** Guarded by monitor: check the lease now (a write met a stale epoch). */
    private boolean checkNow;

    // State of the lease loop (its thread only).
    private long epoch;
    private long highestEpochLed;
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
        long term = leadership.currentEpoch();
        if (term == 0) {
            LOG.debug("Not publishing the leader information of {}: not the leader.", componentId);
            return;
        }
        write(term, componentId, info);
    }

    @Override
    public void deleteLeaderInformation(String componentId) {
        long term = leadership.currentEpoch();
        if (term != 0) {
            write(term, componentId, LeaderInformation.empty());
        }
    }

    private void write(long term, String componentId, LeaderInformation info) {
        try {
            writer.execute(() -> writeWhileLeading(term, componentId, info));
        } catch (RejectedExecutionException e) {
            LOG.debug("Not writing the leader information of {}: the driver is closed.", componentId);
        }
    }

    /** Writes (or, for empty information, deletes) until done, fenced, or the term is over. */
    private void writeWhileLeading(long term, String componentId, LeaderInformation info) {
        long pause = Math.max(10, api.client().retryBackoff().toMillis());
        while (isRunning() && leadership.currentEpoch() == term) {
            try {
                if (info.isEmpty()) {
                    api.deleteLeaderInfo(term, componentId);
                } else {
                    api.publishLeaderInfo(
                            term, componentId, info.getLeaderAddress(), info.getLeaderSessionID().toString());
                }
                LOG.debug("{} leader information of {} (epoch {}).", info.isEmpty() ? "Deleted" : "Published", componentId, term);
                return;
            } catch (HaApi.NotLeaderException e) {
                LOG.info("jobstore refused the leader information of {} of epoch {}: {}", componentId, term, e.getMessage());
                return;
            } catch (IOException e) {
                LOG.warn("Could not write the leader information of {} (epoch {}); retrying while leading.", componentId, term, e);
            }
            try {
                Thread.sleep(pause);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            pause = Math.min(pause * 2, api.client().maxRetryBackoff().toMillis());
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
                if (epoch == 0) {
                    if (!tryAcquire()) {
                        pauseUntil(System.nanoTime() + leadership.renewInterval.toNanos(), false);
                    }
                } else {
                    renewOrRevoke();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException | Error e) {
            LOG.error("The jobstore lease loop of cluster {} failed.", api.clusterId(), e);
            if (epoch != 0) {
                revoke("the lease loop failed: " + e);
            }
            listener.onError(e);
        }
    }

    /** Acquisition attempts; true when the process leads afterwards. */
    private boolean tryAcquire() throws InterruptedException {
        for (int attempt = 0; attempt < 3 && isRunning(); attempt++) {
            long sent = System.nanoTime();
            long acquired = acquireOnce();
            if (acquired < 0) {
                return false;
            }
            if (acquired <= highestEpochLed) {
                // Our own lease of an earlier term is still live in jobstore (a renewal landed
                // but was not answered in time): give it up, so that the new term gets a new epoch.
                LOG.info("Releasing the leader lease of cluster {} of the earlier term (epoch {}).", api.clusterId(), acquired);
                release(acquired);
                continue;
            }
            long deadline = leadership.deadlineAfter(sent);
            if (System.nanoTime() - deadline >= 0) {
                // The answer came too late to act on it; asking again renews the same epoch.
                LOG.info("The lease of cluster {} (epoch {}) was granted too late to lead on it; asking again.",
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

    private void lead(long acquired, long sent, long deadline) {
        epoch = acquired;
        highestEpochLed = acquired;
        deadlineNanos = deadline;
        nextRenewalNanos = sent + leadership.renewInterval.toNanos();
        leadership.lead(acquired, deadline);
        UUID session = UUID.randomUUID();
        LOG.info(
                "JobManager {} leads cluster {} now: epoch {}, leader session {}.",
                leadership.holder,
                api.clusterId(),
                acquired,
                session);
        listener.onGrantLeadership(session);
    }

    /** The epoch acquired, or -1 (held by another JobManager, or jobstore did not answer). */
    private long acquireOnce() throws InterruptedException {
        try {
            long acquired = leaseApi.acquire(leadership.holder, leadership.lease, attemptTimeout);
            if (acquired < 0) {
                LOG.debug("The leader lease of cluster {} is held by another JobManager.", api.clusterId());
            }
            return acquired;
        } catch (IOException e) {
            interruptedCheck(e);
            LOG.warn("Could not try to acquire the leader lease of cluster {}: {}", api.clusterId(), e.getMessage());
            return -1;
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
        // An attempt ends by the deadline: a hanging replica cannot keep the loop past it.
        long bound = Math.min(deadlineNanos - now, Math.min(attemptTimeout.toNanos(), leadership.renewInterval.toNanos()));
        Duration timeout = Duration.ofNanos(Math.max(1_000_000L, bound));
        try {
            if (leaseApi.renew(leadership.holder, epoch, leadership.lease, timeout)) {
                deadlineNanos = leadership.deadlineAfter(now);
                nextRenewalNanos = now + leadership.renewInterval.toNanos();
                leadership.lead(epoch, deadlineNanos);
            } else {
                revoke("jobstore answered that the lease of epoch " + epoch + " is no longer held");
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
                        "Could not renew the leader lease of cluster {} (epoch {}): {}; retrying, leadership is"
                                + " given up in {} ms unless a renewal gets through.",
                        api.clusterId(), epoch, e.getMessage(), left);
            } else {
                LOG.debug("Renewal {} of the leader lease of cluster {} failed ({} ms left): {}",
                        failedRenewals, api.clusterId(), left, e.getMessage());
            }
            nextRenewalNanos = System.nanoTime() + pause;
            return;
        }
        if (failedRenewals > 0) {
            LOG.info("Renewed the leader lease of cluster {} (epoch {}) after {} failed attempt(s).",
                    api.clusterId(), epoch, failedRenewals);
            failedRenewals = 0;
        }
    }

    private void revoke(String reason) {
        long ended = epoch;
        failedRenewals = 0;
        leadership.end();
        epoch = 0;
        LOG.warn("JobManager {} gives up the leadership of cluster {} (epoch {}): {}.", leadership.holder,
                api.clusterId(), ended, reason);
        listener.onRevokeLeadership();
    }

    private void release(long term) {
        try {
            leaseApi.release(leadership.holder, term, attemptTimeout);
        } catch (IOException e) {
            LOG.info("Could not release the leader lease of cluster {} (epoch {}): {}", api.clusterId(), term, e.getMessage());
        }
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
        long term = epoch;
        if (leaseLoop.isAlive()) {
            LOG.warn("The jobstore lease loop of cluster {} did not stop in time.", api.clusterId());
            term = leadership.currentEpoch();
        }
        leadership.end();
        if (term != 0) {
            release(term);
            LOG.info("Released the leader lease of cluster {} (epoch {}).", api.clusterId(), term);
        }
        writer.awaitTermination(attemptTimeout.toMillis(), TimeUnit.MILLISECONDS);
    }

    @Override
    public String toString() {
        return "JobstoreLeaderElectionDriver{cluster=" + api.clusterId() + ", holder=" + leadership.holder + "}";
    }
}
