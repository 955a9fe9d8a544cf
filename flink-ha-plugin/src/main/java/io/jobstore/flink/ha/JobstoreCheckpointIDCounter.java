package io.jobstore.flink.ha;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.runtime.checkpoint.CheckpointIDCounter;
import org.apache.flink.util.FlinkRuntimeException;
import org.apache.flink.util.concurrent.FutureUtils;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * A job's checkpoint id counter on jobstore's counter routes: {@code getAndIncrement} is one
 * atomic statement in jobstore (no id is handed out twice, also across processes and replicas),
 * every write names the lease (epoch and lease id), and the counter is removed when the job reaches a globally
 * terminal state. A retried increment whose first answer was lost may skip an id, never repeat one.
 */
final class JobstoreCheckpointIDCounter implements CheckpointIDCounter {

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreCheckpointIDCounter.class);

    private final HaApi api;
    private final Leadership leadership;
    private final String job;
    private final Executor ioExecutor;

    JobstoreCheckpointIDCounter(HaApi api, Leadership leadership, JobID jobId, Executor ioExecutor) {
        this.api = api;
        this.leadership = leadership;
        this.job = jobId.toHexString();
        this.ioExecutor = ioExecutor;
    }

    @Override
    public void start() {
        LOG.debug("Checkpoint id counter of job {} in jobstore (cluster {}).", job, api.clusterId());
    }

    @Override
    public CompletableFuture<Void> shutdown(JobStatus jobStatus) {
        if (!jobStatus.isGloballyTerminalState()) {
            return FutureUtils.completedVoidFuture();
        }
        return FutureUtils.runAsync(
                () -> {
                    api.deleteCounter(leadership.heldLease(), job);
                    LOG.info("Removed the checkpoint id counter of job {} ({}) from jobstore.", job, jobStatus);
                },
                ioExecutor);
    }

    @Override
    public long getAndIncrement() throws IOException {
        return api.getAndIncrement(leadership.heldLease(), job);
    }

    @Override
    public long get() {
        try {
            Long next = api.counter(job);
            return next == null ? INITIAL_CHECKPOINT_ID : next;
        } catch (IOException e) {
            throw new FlinkRuntimeException("Could not read the checkpoint id counter of job " + job + " from jobstore", e);
        }
    }

    @Override
    public void setCount(long newId) throws IOException {
        api.setCounter(leadership.heldLease(), job, newId);
    }
}
