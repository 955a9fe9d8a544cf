package io.jobstore.flink.ha;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.IllegalConfigurationException;

import java.net.InetAddress;
import java.time.Duration;
import java.util.Objects;
import java.util.UUID;

/**
 * A JobManager process's claim on its cluster's leader lease in jobstore: who it is (the holder,
 * unique per process), the lease timing, and the term it leads in now, if any. The leader election
 * driver updates the term; every fenced write of the stores asks it for the lease to name (its
 * epoch and lease id).
 *
 * <p>A term ends locally at its <em>deadline</em>, a margin before the lease can expire in jobstore
 * (the lease is counted from the moment the acquiring or renewing request was sent, so jobstore's
 * expiry is never earlier): past the deadline the process no longer claims leadership, whether the
 * lease loop has already noticed or not.
 */
final class Leadership {

    /** jobstore accepts leases of up to a day. */
    static final Duration MAX_LEASE = Duration.ofHours(24);

    /** A lease and until when (System.nanoTime) the process may act on it. */
    private static final class Term {
        final HaApi.Lease lease;
        final long deadlineNanos;

        Term(HaApi.Lease lease, long deadlineNanos) {
            this.lease = lease;
            this.deadlineNanos = deadlineNanos;
        }
    }

    /** Who claims the lease: unique per process. */
    final String holder;
    /** How long the lease lasts unrenewed ({@code jobstore.ha.lease-duration}). */
    final Duration lease;
    /**
     * How often it is renewed, and a standby tries to acquire it when jobstore does not tell when
     * the lease expires ({@code jobstore.ha.renew-interval}).
     */
    final Duration renewInterval;
    private volatile Term term;
    /** Called when a write met a stale lease: the lease loop checks the lease at once. */
    private volatile Runnable suspicionHandler = () -> {};

    Leadership(String holder, Duration lease, Duration renewInterval) {
        String leaseKey = "'" + JobstoreOptions.LEASE_DURATION.key() + "'";
        require(!lease.isNegative() && !lease.isZero() && lease.compareTo(MAX_LEASE) <= 0,
                leaseKey + " must be positive and at most 24 h, got " + lease);
        require(!renewInterval.isNegative() && !renewInterval.isZero() && renewInterval.compareTo(lease) < 0,
                "'" + JobstoreOptions.RENEW_INTERVAL.key() + "' must be positive and shorter than " + leaseKey
                        + " (" + lease + "), got " + renewInterval);
        this.holder = holder;
        this.lease = lease;
        this.renewInterval = renewInterval;
    }

    private static void require(boolean valid, String message) {
        if (!valid) {
            throw new IllegalConfigurationException(message);
        }
    }

    static Leadership fromConfiguration(Configuration config) {
        return new Leadership(
                newHolderId(), config.get(JobstoreOptions.LEASE_DURATION), config.get(JobstoreOptions.RENEW_INTERVAL));
    }

    /** {@code pid@host/random}: unique per process (and per HA services instance). */
    static String newHolderId() {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (Exception e) {
            host = "unknown-host";
        }
        String id = ProcessHandle.current().pid() + "@" + host + "/" + UUID.randomUUID().toString().substring(0, 8);
        return id.length() <= 256 ? id : id.substring(id.length() - 256);
    }

    /**
     * How long before the lease can expire the process gives its leadership up: a tenth of the
     * lease, at most half of the time between a renewal and the lease's end.
     */
    Duration margin() {
        Duration tenth = lease.dividedBy(10);
        Duration half = lease.minus(renewInterval).dividedBy(2);
        return tenth.compareTo(half) < 0 ? tenth : half;
    }

    /** The local deadline of a lease whose acquiring or renewing request was sent at sentNanos. */
    long deadlineAfter(long sentNanos) {
        return sentNanos + lease.minus(margin()).toNanos();
    }

    void lead(HaApi.Lease lease, long deadlineNanos) {
        term = new Term(Objects.requireNonNull(lease, "lease"), deadlineNanos);
    }

    void end() {
        term = null;
    }

    /** Whether the process leads now (it holds a term whose deadline has not passed). */
    boolean isLeader() {
        Term t = term;
        return t != null && System.nanoTime() - t.deadlineNanos < 0;
    }

    /** The lease of the current term, or null when the process does not lead. */
    HaApi.Lease currentLease() {
        Term t = term;
        return t != null && System.nanoTime() - t.deadlineNanos < 0 ? t.lease : null;
    }

    /** The epoch of the current term, or 0 when the process does not lead (for logs). */
    long currentEpoch() {
        HaApi.Lease l = currentLease();
        return l == null ? 0 : l.epoch;
    }

    /** The lease a fenced write names now. */
    HaApi.Lease heldLease() throws HaApi.NotLeaderException {
        HaApi.Lease l = currentLease();
        if (l == null) {
            throw new HaApi.NotLeaderException(
                    "this JobManager (" + holder + ") does not hold the leader lease of the cluster now");
        }
        return l;
    }

    void onSuspicion(Runnable handler) {
        suspicionHandler = handler;
    }

    /** A write met a stale lease. */
    void suspect() {
        suspicionHandler.run();
    }
}
