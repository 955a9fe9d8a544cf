package io.jobstore.flink.ha;

import org.apache.flink.runtime.leaderelection.LeaderInformation;
import org.apache.flink.runtime.leaderretrieval.DefaultLeaderRetrievalService;
import org.apache.flink.runtime.leaderretrieval.LeaderRetrievalDriver;
import org.apache.flink.runtime.leaderretrieval.LeaderRetrievalEventHandler;
import org.apache.flink.runtime.leaderretrieval.LeaderRetrievalService;
import org.apache.flink.util.concurrent.ExecutorThreadFactory;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The leader information of a cluster as jobstore stores it, kept current by one long poll per
 * process ({@code GET .../ha/leader-info?wait-ms=N} with {@code If-None-Match}): jobstore answers
 * when anything changed, or after the wait with 304. Every leader retrieval service of the process
 * and its leader election driver subscribe to it; subscribers get each new listing in order, on
 * one notification thread. The poll starts with the first subscriber.
 *
 * <p>Retrieval reports a component's leader only when it was published in the newest epoch of the
 * listing: information left behind by an earlier leader (whose lease has passed to another
 * JobManager) is reported as no leader until the new leader publishes its own.
 */
final class LeaderInfoWatcher implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(LeaderInfoWatcher.class);

    /** How long one poll waits at most for a change (jobstore allows up to 60 s). */
    static final Duration DEFAULT_WAIT = Duration.ofSeconds(20);
    /** Pause between polls when jobstore answers at once with an unchanged listing. */
    private static final long UNCHANGED_PAUSE_MILLIS = 1000;

    private final HaApi api;
    private final Duration wait;
    private final List<Consumer<HaApi.Listing>> subscribers = new CopyOnWriteArrayList<>();
    private final ExecutorService notifier;
    private final Object lock = new Object();
    /** Guarded by lock. */
    private Thread poller;
    /** Guarded by lock. */
    private boolean closed;
    private volatile HaApi.Listing latest;

    LeaderInfoWatcher(HaApi api, Duration wait) {
        this.api = api;
        this.wait = wait;
        this.notifier =
                Executors.newSingleThreadExecutor(
                        new ExecutorThreadFactory("jobstore-ha-leader-notify-" + api.clusterId()));
    }

    /** Delivers every new listing (the current one first, if known); close the result to stop. */
    AutoCloseable subscribe(Consumer<HaApi.Listing> subscriber) {
        synchronized (lock) {
            if (closed) {
                throw new IllegalStateException("the leader information watcher is closed");
            }
            subscribers.add(subscriber);
            HaApi.Listing now = latest;
            if (now != null) {
                notifier.execute(() -> deliver(subscriber, now));
            }
            if (poller == null) {
                poller = new Thread(this::pollLoop, "jobstore-ha-leader-poll-" + api.clusterId());
                poller.setDaemon(true);
                poller.start();
            }
        }
        return () -> subscribers.remove(subscriber);
    }

    /** A leader retrieval service of one component (resource manager, dispatcher, a job, ...). */
    LeaderRetrievalService retrievalService(String componentId) {
        return new DefaultLeaderRetrievalService((handler, fatal) -> new Retrieval(componentId, handler));
    }

    /** The stored record as Flink's leader information (empty for a malformed session id). */
    static LeaderInformation information(HaApi.LeaderRecord r) {
        try {
            return LeaderInformation.known(UUID.fromString(r.sessionId), r.address);
        } catch (IllegalArgumentException e) {
            LOG.warn("Ignoring the leader information of {}: session id '{}' is not a UUID.", r.component, r.sessionId);
            return LeaderInformation.empty();
        }
    }

    /** The leader of a component in a listing: published in its newest epoch, else empty. */
    static LeaderInformation leaderOf(HaApi.Listing listing, String componentId) {
        HaApi.LeaderRecord r = listing.records.get(componentId);
        if (r == null || r.epoch < listing.newestEpoch()) {
            return LeaderInformation.empty();
        }
        return information(r);
    }

    private void pollLoop() {
        String etag = null;
        Backoff backoff = api.client().backoff(10);
        boolean failing = false;
        while (!isClosed()) {
            try {
                HaApi.Listing listing = api.pollLeaderInfo(etag, wait);
                if (failing) {
                    LOG.info("Reading the leader information of cluster {} from jobstore works again.", api.clusterId());
                    failing = false;
                }
                backoff.reset();
                if (listing == null) {
                    continue;
                }
                boolean unchanged = listing.etag == null || listing.etag.equals(etag);
                etag = listing.etag;
                publish(listing);
                if (unchanged) {
                    // jobstore did not wait (no ETag, or the same one): poll at a gentle pace.
                    sleep(UNCHANGED_PAUSE_MILLIS);
                }
            } catch (IOException e) {
                if (isClosed() || Thread.currentThread().isInterrupted()) {
                    return;
                }
                if (!failing) {
                    LOG.warn("Could not read the leader information of cluster {} from jobstore; retrying.", api.clusterId(), e);
                    failing = true;
                } else {
                    LOG.debug("Reading the leader information of cluster {} failed again: {}", api.clusterId(), e.getMessage());
                }
                sleep(backoff.next());
            } catch (RuntimeException e) {
                LOG.error("Unexpected error while watching the leader information of cluster {}.", api.clusterId(), e);
                sleep(backoff.next());
            }
        }
    }

    private void publish(HaApi.Listing listing) {
        latest = listing;
        LOG.debug("Leader information of cluster {}: {}", api.clusterId(), listing.records.values());
        for (Consumer<HaApi.Listing> s : subscribers) {
            try {
                notifier.execute(() -> deliver(s, listing));
            } catch (RuntimeException e) {
                return; // closed
            }
        }
    }

    private void deliver(Consumer<HaApi.Listing> subscriber, HaApi.Listing listing) {
        if (subscribers.contains(subscriber) && latest == listing) {
            try {
                subscriber.accept(listing);
            } catch (RuntimeException e) {
                LOG.error("A subscriber of the leader information of cluster {} failed.", api.clusterId(), e);
            }
        }
    }

    private void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private boolean isClosed() {
        synchronized (lock) {
            return closed;
        }
    }

    @Override
    public void close() throws InterruptedException {
        Thread t;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            t = poller;
        }
        subscribers.clear();
        if (t != null) {
            t.interrupt();
            t.join(TimeUnit.SECONDS.toMillis(5));
        }
        notifier.shutdownNow();
    }

    /** The retrieval driver of one component: notifies on every change of its leader. */
    private final class Retrieval implements LeaderRetrievalDriver {
        private final String componentId;
        private final LeaderRetrievalEventHandler handler;
        private final AutoCloseable subscription;
        /** Only touched on the notification thread. */
        private LeaderInformation last = LeaderInformation.empty();

        Retrieval(String componentId, LeaderRetrievalEventHandler handler) {
            this.componentId = componentId;
            this.handler = handler;
            this.subscription = subscribe(this::update);
        }

        private void update(HaApi.Listing listing) {
            LeaderInformation now = leaderOf(listing, componentId);
            if (!now.equals(last)) {
                last = now;
                LOG.debug("Leader of {} in cluster {}: {}", componentId, api.clusterId(), now);
                handler.notifyLeaderAddress(now);
            }
        }

        @Override
        public void close() throws Exception {
            subscription.close();
        }

        @Override
        public String toString() {
            return "JobstoreLeaderRetrieval{cluster=" + api.clusterId() + ", component=" + componentId + "}";
        }
    }
}
