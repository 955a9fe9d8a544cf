package io.jobstore.flink.ha;

import org.apache.flink.api.common.ApplicationID;
import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.RecoveryClaimMode;
import org.apache.flink.runtime.blob.BlobStoreService;
import org.apache.flink.runtime.blob.BlobUtils;
import org.apache.flink.runtime.checkpoint.CheckpointIDCounter;
import org.apache.flink.runtime.checkpoint.CheckpointRecoveryFactory;
import org.apache.flink.runtime.checkpoint.CheckpointStoreUtil;
import org.apache.flink.runtime.checkpoint.CompletedCheckpoint;
import org.apache.flink.runtime.checkpoint.CompletedCheckpointStore;
import org.apache.flink.runtime.checkpoint.DefaultCompletedCheckpointStore;
import org.apache.flink.runtime.checkpoint.DefaultCompletedCheckpointStoreUtils;
import org.apache.flink.runtime.highavailability.AbstractHaServices;
import org.apache.flink.runtime.highavailability.ClientHighAvailabilityServices;
import org.apache.flink.runtime.highavailability.HighAvailabilityServicesUtils;
import org.apache.flink.runtime.jobmanager.ApplicationStore;
import org.apache.flink.runtime.jobmanager.ApplicationStoreUtil;
import org.apache.flink.runtime.jobmanager.DefaultApplicationStore;
import org.apache.flink.runtime.jobmanager.DefaultExecutionPlanStore;
import org.apache.flink.runtime.jobmanager.ExecutionPlanStore;
import org.apache.flink.runtime.jobmanager.ExecutionPlanStoreUtil;
import org.apache.flink.runtime.jobmanager.NoOpExecutionPlanStoreWatcher;
import org.apache.flink.runtime.leaderelection.LeaderElectionDriver;
import org.apache.flink.runtime.leaderretrieval.LeaderRetrievalService;
import org.apache.flink.runtime.persistence.filesystem.FileSystemStateStorageHelper;
import org.apache.flink.runtime.state.SharedStateRegistryFactory;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.Serializable;
import java.time.Duration;
import java.util.Collection;
import java.util.concurrent.Executor;

/**
 * {@code jobstore.ha.mode: jobstore}: Flink's HA services with jobstore (and so its database) as
 * the only coordination service. Leader election on the cluster's lease ({@link
 * JobstoreLeaderElectionDriver}), leader retrieval through one long poll per process ({@link
 * LeaderInfoWatcher}), Flink's own execution plan, application and completed checkpoint stores over
 * a {@link JobstoreStateHandleStore} (state files under {@code high-availability.storageDir}, the
 * pointers in jobstore), checkpoint id counters in jobstore, and the job and application result
 * stores in jobstore. Every write of the leader names its lease (epoch and lease id).
 *
 * <p>Components in jobstore's leader information: {@code resourcemanager}, {@code dispatcher},
 * {@code restserver} and each job's id.
 */
public class JobstoreLeaderElectionHaServices extends AbstractHaServices {

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreLeaderElectionHaServices.class);

    /** The REST endpoint's component (the others: resourcemanager, dispatcher, job ids). */
    static final String REST_SERVER = "restserver";

    /** What the services and their leader election driver share. */
    static final class Backend {
        final JobstoreClient client;
        final Leadership leadership;
        final HaApi api;
        /** The lease routes, on a client whose attempts end within a renew interval (a renewal may take
         * longer while the term's deadline is far: the driver gives it its own timeout). */
        final HaApi leaseApi;
        final LeaderInfoWatcher watcher;

        Backend(JobstoreClient client, Leadership leadership, Duration pollWait) {
            this.client = client;
            this.leadership = leadership;
            this.api = new HaApi(client, leadership::suspect);
            Duration attempt =
                    client.timeout().compareTo(leadership.renewInterval) < 0
                            ? client.timeout()
                            : leadership.renewInterval;
            this.leaseApi = new HaApi(client.withTimeout(attempt), leadership::suspect);
            this.watcher = new LeaderInfoWatcher(api, pollWait);
        }

        LeaderElectionDriver createDriver(LeaderElectionDriver.Listener listener) {
            return new JobstoreLeaderElectionDriver(leaseApi, api, leadership, watcher, listener);
        }
    }

    private final Backend backend;

    JobstoreLeaderElectionHaServices(
            Configuration configuration, Executor ioExecutor, BlobStoreService blobStore, Backend backend) {
        super(
                configuration,
                backend::createDriver,
                ioExecutor,
                blobStore,
                new JobstoreJobResultStore(backend.client, ioExecutor),
                new JobstoreApplicationResultStore(backend.client, ioExecutor));
        this.backend = backend;
    }

    static JobstoreLeaderElectionHaServices create(
            Configuration configuration, Executor ioExecutor, JobstoreClient client) throws Exception {
        Backend backend =
                new Backend(client, Leadership.fromConfiguration(configuration), LeaderInfoWatcher.DEFAULT_WAIT);
        // Checks high-availability.storageDir early: execution plans, checkpoint metadata and
        // blobs are files there.
        HighAvailabilityServicesUtils.getClusterHighAvailableStoragePath(configuration);
        return new JobstoreLeaderElectionHaServices(
                configuration, ioExecutor, BlobUtils.createBlobStoreFromConfig(configuration), backend);
    }

    /** What {@code flink run}, {@code flink list} and other clients need: the REST leader. */
    static ClientHighAvailabilityServices createClientServices(JobstoreClient client) {
        LeaderInfoWatcher watcher = new LeaderInfoWatcher(new HaApi(client, () -> {}), LeaderInfoWatcher.DEFAULT_WAIT);
        return new ClientHighAvailabilityServices() {
            @Override
            public LeaderRetrievalService getClusterRestEndpointLeaderRetriever() {
                return watcher.retrievalService(REST_SERVER);
            }

            @Override
            public void close() throws Exception {
                watcher.close();
            }
        };
    }

    Backend backend() {
        return backend;
    }

    @Override
    protected LeaderRetrievalService createLeaderRetrievalService(String componentId) {
        return backend.watcher.retrievalService(componentId);
    }

    @Override
    protected CheckpointRecoveryFactory createCheckpointRecoveryFactory() {
        return new CheckpointRecovery();
    }

    @Override
    protected ExecutionPlanStore createExecutionPlanStore() throws Exception {
        return new DefaultExecutionPlanStore<>(
                handles(HaApi.EXECUTION_PLAN, null, "submittedExecutionPlan"),
                NoOpExecutionPlanStoreWatcher.INSTANCE,
                Names.INSTANCE);
    }

    @Override
    protected ApplicationStore createApplicationStore() throws Exception {
        return new DefaultApplicationStore<>(handles(HaApi.APPLICATION, null, "submittedApplication"), Names.INSTANCE);
    }

    private <T extends Serializable> JobstoreStateHandleStore<T> handles(String kind, JobID job, String filePrefix)
            throws IOException {
        return new JobstoreStateHandleStore<>(
                backend.api,
                backend.leadership,
                new FileSystemStateStorageHelper<>(
                        HighAvailabilityServicesUtils.getClusterHighAvailableStoragePath(configuration), filePrefix),
                kind,
                job == null ? null : job.toHexString());
    }

    @Override
    protected void internalClose() throws Exception {
        backend.watcher.close();
    }

    /**
     * The cluster's HA data in jobstore (a cluster shutting down for good). By then the leader
     * election has released the lease, so it is taken once more for the cleanup, unless another
     * JobManager holds it.
     */
    @Override
    protected void internalCleanup() throws Exception {
        Leadership leadership = backend.leadership;
        HaApi.Lease held = leadership.currentLease();
        if (held != null) {
            backend.api.cleanupCluster(held);
            return;
        }
        Duration timeout = backend.leaseApi.client().timeout();
        HaApi.Lease acquired = backend.leaseApi.acquire(leadership.holder, leadership.lease, timeout);
        if (acquired == null) {
            throw new IOException(
                    "Cannot remove the HA data of cluster "
                            + backend.client.clusterId()
                            + " from jobstore: another JobManager holds the cluster's leader lease.");
        }
        try {
            backend.api.cleanupCluster(acquired);
            LOG.info("Removed the HA data of cluster {} from jobstore ({}).", backend.client.clusterId(), acquired);
        } finally {
            backend.leaseApi.release(leadership.holder, acquired, timeout);
        }
    }

    @Override
    protected void internalCleanupJobData(JobID jobID) throws Exception {
        backend.api.cleanupJob(backend.leadership.heldLease(), jobID.toHexString());
    }

    @Override
    protected String getLeaderPathForResourceManager() {
        return "resourcemanager";
    }

    @Override
    protected String getLeaderPathForDispatcher() {
        return "dispatcher";
    }

    @Override
    protected String getLeaderPathForJobManager(JobID jobID) {
        return jobID.toHexString();
    }

    @Override
    protected String getLeaderPathForRestServer() {
        return REST_SERVER;
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "(cluster " + backend.client.clusterId() + ", jobstore " + backend.client.baseUrl() + ")";
    }

    /** Completed checkpoints of a job as state handles of kind checkpoint, and its id counter. */
    private final class CheckpointRecovery implements CheckpointRecoveryFactory {
        @Override
        public CompletedCheckpointStore createRecoveredCompletedCheckpointStore(
                JobID jobId,
                int maxNumberOfCheckpointsToRetain,
                SharedStateRegistryFactory sharedStateRegistryFactory,
                Executor executor,
                RecoveryClaimMode recoveryClaimMode)
                throws Exception {
            JobstoreStateHandleStore<CompletedCheckpoint> store = handles(HaApi.CHECKPOINT, jobId, "completedCheckpoint");
            Collection<CompletedCheckpoint> checkpoints =
                    DefaultCompletedCheckpointStoreUtils.retrieveCompletedCheckpoints(store, Names.INSTANCE);
            return new DefaultCompletedCheckpointStore<>(
                    maxNumberOfCheckpointsToRetain,
                    store,
                    Names.INSTANCE,
                    checkpoints,
                    sharedStateRegistryFactory.create(ioExecutor, checkpoints, recoveryClaimMode),
                    executor);
        }

        @Override
        public CheckpointIDCounter createCheckpointIDCounter(JobID jobId) {
            return new JobstoreCheckpointIDCounter(backend.api, backend.leadership, jobId, ioExecutor);
        }
    }

    /**
     * Entry names: execution plans and applications by their hex id, checkpoints as {@code
     * checkpoint-} and the id in 19 digits (so that names sort as ids do).
     */
    enum Names implements ExecutionPlanStoreUtil, ApplicationStoreUtil, CheckpointStoreUtil {
        INSTANCE;

        private static final String CHECKPOINT_PREFIX = "checkpoint-";

        @Override
        public String jobIDToName(JobID jobId) {
            return jobId.toHexString();
        }

        @Override
        public String applicationIdToName(ApplicationID applicationId) {
            return applicationId.toHexString();
        }

        @Override
        public JobID nameToJobID(String name) {
            return JobID.fromHexString(name);
        }

        @Override
        public ApplicationID nameToApplicationId(String name) {
            return ApplicationID.fromHexString(name);
        }

        @Override
        public String checkpointIDToName(long checkpointId) {
            return String.format("%s%019d", CHECKPOINT_PREFIX, checkpointId);
        }

        @Override
        public long nameToCheckpointID(String name) {
            try {
                return Long.parseLong(name.substring(CHECKPOINT_PREFIX.length()));
            } catch (RuntimeException e) {
                LOG.warn("Not a checkpoint entry name: {}", name);
                return INVALID_CHECKPOINT_ID;
            }
        }
    }
}
