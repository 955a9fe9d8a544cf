package io.jobstore.flink.ha;

import org.apache.flink.runtime.highavailability.ApplicationResultStore;
import org.apache.flink.runtime.highavailability.JobResultStore;
import org.apache.flink.runtime.highavailability.nonha.standalone.StandaloneHaServices;

import java.util.concurrent.Executor;

/**
 * Flink's standalone HA services (fixed leader addresses, no ZooKeeper/Kubernetes, in-memory
 * execution plans and checkpoints) whose job result store and application result store live in
 * jobstore.
 *
 * <p>{@code cleanupAllData()} (a cluster shutting down for good) removes nothing from jobstore: the
 * entries are the durable record of the cluster's terminated jobs and applications, as the job
 * result store of Flink's own HA services outlives that call too.
 */
public class JobstoreHaServices extends StandaloneHaServices {

    private final JobstoreClient client;
    private final JobstoreJobResultStore jobResultStore;
    private final JobstoreApplicationResultStore applicationResultStore;

    JobstoreHaServices(
            String resourceManagerAddress,
            String dispatcherAddress,
            String clusterRestEndpointAddress,
            JobstoreClient client,
            Executor ioExecutor) {
        super(resourceManagerAddress, dispatcherAddress, clusterRestEndpointAddress);
        this.client = client;
        this.jobResultStore = new JobstoreJobResultStore(client, ioExecutor);
        this.applicationResultStore = new JobstoreApplicationResultStore(client, ioExecutor);
    }

    @Override
    public JobResultStore getJobResultStore() throws Exception {
        synchronized (lock) {
            checkNotShutdown();
            return jobResultStore;
        }
    }

    @Override
    public ApplicationResultStore getApplicationResultStore() throws Exception {
        synchronized (lock) {
            checkNotShutdown();
            return applicationResultStore;
        }
    }

    JobstoreClient client() {
        return client;
    }
}
