package io.jobstore.flink.ha;

import org.apache.flink.api.common.JobID;
import org.apache.flink.runtime.blob.BlobStore;
import org.apache.flink.runtime.checkpoint.CheckpointRecoveryFactory;
import org.apache.flink.runtime.highavailability.ApplicationResultStore;
import org.apache.flink.runtime.highavailability.HighAvailabilityServices;
import org.apache.flink.runtime.highavailability.JobResultStore;
import org.apache.flink.runtime.jobmanager.ApplicationStore;
import org.apache.flink.runtime.jobmanager.ExecutionPlanStore;
import org.apache.flink.runtime.leaderelection.LeaderElection;
import org.apache.flink.runtime.leaderretrieval.LeaderRetrievalService;

import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * Flink's own HA services of another mode (ZooKeeper or Kubernetes: leader election, execution
 * plans, applications, checkpoints, blobs) with the job result store and the application result
 * store in jobstore.
 *
 * <p>Only {@link #getJobResultStore()} and {@link #getApplicationResultStore()} are answered here;
 * every other method of {@link HighAvailabilityServices}, its default methods included, is
 * forwarded to the wrapped services unchanged (a default method of the interface would otherwise
 * run here, against this object, instead of the wrapped services' own implementation). The
 * wrapped services still build their own file-based result stores in their constructor; they stay
 * unused.
 *
 * <p>{@link #cleanupAllData()} (a cluster shutting down for good) is forwarded: it removes the
 * wrapped mode's data (ZooKeeper nodes, ConfigMaps, blobs) and nothing in jobstore, whose entries
 * are the durable record of the cluster's terminated jobs and applications.
 */
public class JobstoreResultStoresHaServices implements HighAvailabilityServices {

    private final HighAvailabilityServices delegate;
    private final JobstoreClient client;
    private final JobstoreJobResultStore jobResultStore;
    private final JobstoreApplicationResultStore applicationResultStore;

    JobstoreResultStoresHaServices(
            HighAvailabilityServices delegate, JobstoreClient client, Executor ioExecutor) {
        this.delegate = delegate;
        this.client = client;
        this.jobResultStore = new JobstoreJobResultStore(client, ioExecutor);
        this.applicationResultStore = new JobstoreApplicationResultStore(client, ioExecutor);
    }

    /** The wrapped services of the configured mode. */
    public HighAvailabilityServices delegate() {
        return delegate;
    }

    JobstoreClient client() {
        return client;
    }

    // --- the two stores kept in jobstore -----------------------------------------------------

    @Override
    public JobResultStore getJobResultStore() {
        return jobResultStore;
    }

    @Override
    public ApplicationResultStore getApplicationResultStore() {
        return applicationResultStore;
    }

    // --- everything else is the wrapped mode's -------------------------------------------------

    @Override
    public LeaderRetrievalService getResourceManagerLeaderRetriever() {
        return delegate.getResourceManagerLeaderRetriever();
    }

    @Override
    public LeaderRetrievalService getDispatcherLeaderRetriever() {
        return delegate.getDispatcherLeaderRetriever();
    }

    @Override
    @Deprecated
    @SuppressWarnings("deprecation")
    public LeaderRetrievalService getJobManagerLeaderRetriever(JobID jobID) {
        return delegate.getJobManagerLeaderRetriever(jobID);
    }

    @Override
    public LeaderRetrievalService getJobManagerLeaderRetriever(
            JobID jobID, String defaultJobManagerAddress) {
        return delegate.getJobManagerLeaderRetriever(jobID, defaultJobManagerAddress);
    }

    @Override
    @Deprecated
    @SuppressWarnings("deprecation")
    public LeaderRetrievalService getWebMonitorLeaderRetriever() {
        return delegate.getWebMonitorLeaderRetriever();
    }

    @Override
    public LeaderElection getResourceManagerLeaderElection() {
        return delegate.getResourceManagerLeaderElection();
    }

    @Override
    public LeaderElection getDispatcherLeaderElection() {
        return delegate.getDispatcherLeaderElection();
    }

    @Override
    public LeaderElection getJobManagerLeaderElection(JobID jobID) {
        return delegate.getJobManagerLeaderElection(jobID);
    }

    @Override
    @Deprecated
    @SuppressWarnings("deprecation")
    public LeaderElection getWebMonitorLeaderElection() {
        return delegate.getWebMonitorLeaderElection();
    }

    @Override
    public LeaderElection getClusterRestEndpointLeaderElection() {
        return delegate.getClusterRestEndpointLeaderElection();
    }

    @Override
    public LeaderRetrievalService getClusterRestEndpointLeaderRetriever() {
        return delegate.getClusterRestEndpointLeaderRetriever();
    }

    @Override
    public CheckpointRecoveryFactory getCheckpointRecoveryFactory() throws Exception {
        return delegate.getCheckpointRecoveryFactory();
    }

    @Override
    public ExecutionPlanStore getExecutionPlanStore() throws Exception {
        return delegate.getExecutionPlanStore();
    }

    @Override
    public ApplicationStore getApplicationStore() throws Exception {
        return delegate.getApplicationStore();
    }

    @Override
    public BlobStore createBlobStore() throws IOException {
        return delegate.createBlobStore();
    }

    @Override
    public void close() throws Exception {
        delegate.close();
    }

    @Override
    public void cleanupAllData() throws Exception {
        delegate.cleanupAllData();
    }

    @Override
    public void closeWithOptionalClean(boolean cleanupData) throws Exception {
        delegate.closeWithOptionalClean(cleanupData);
    }

    @Override
    public CompletableFuture<Void> globalCleanupAsync(JobID jobId, Executor executor) {
        return delegate.globalCleanupAsync(jobId, executor);
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "(" + delegate.getClass().getName() + ", jobstore " + client.baseUrl() + ")";
    }
}
