package io.jobstore.flink.ha;

import java.time.Duration;

/**
 * The plugin's one retry pause: {@code jobstore.retry-backoff} before the first retry, doubled
 * after every pause up to {@code jobstore.retry-max-backoff}. Every retry loop of the plugin (a
 * call's attempts, writes of leader information, the leader-information watcher) takes its
 * pauses from one of these, so that they cannot disagree. The lease loop of {@link
 * JobstoreLeaderElectionDriver} is no backoff: its pauses follow the lease (a renew interval
 * between acquisitions, renewals retried within the lease's deadline). Not thread-safe: one per
 * loop.
 */
final class Backoff {

    private final long firstMillis;
    private final long maxMillis;
    private long nextMillis;

    /**
     * @param floorMillis the shortest pause (a loop that must not spin gives 10 ms; a call's
     *     attempts give 0, so that a configured backoff of 0 retries at once)
     */
    Backoff(Duration first, Duration max, long floorMillis) {
        this.firstMillis = Math.max(floorMillis, Math.max(0, first.toMillis()));
        this.maxMillis = Math.max(this.firstMillis, max.toMillis());
        this.nextMillis = this.firstMillis;
    }

    /** The pause the next {@link #next()} returns. */
    long peek() {
        return nextMillis;
    }

    /** The pause to take now; the one after it is twice as long, up to the maximum. */
    long next() {
        long pause = nextMillis;
        nextMillis = Math.min(maxMillis, pause * 2);
        return pause;
    }

    /** Back to the first pause (after a success). */
    void reset() {
        nextMillis = firstMillis;
    }
}
