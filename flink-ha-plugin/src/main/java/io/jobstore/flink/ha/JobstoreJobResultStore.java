package io.jobstore.flink.ha;

import org.apache.flink.api.common.JobID;
import org.apache.flink.runtime.highavailability.AbstractThreadsafeJobResultStore;
import org.apache.flink.runtime.highavailability.JobResultEntry;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.util.concurrent.FutureUtils;

import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * A {@link org.apache.flink.runtime.highavailability.JobResultStore} kept in jobstore under
 * {@code /v1/clusters/{cluster-id}/job-results}. Entries hold exactly what Flink's
 * {@code FileSystemJobResultStore} writes into its files.
 */
public class JobstoreJobResultStore extends AbstractThreadsafeJobResultStore {

    private final ResultEntries<JobResult> entries;
    private final Executor ioExecutor;

    JobstoreJobResultStore(JobstoreClient client, Executor ioExecutor) {
        super(ioExecutor);
        this.entries = ResultEntries.jobs(client, LoggerFactory.getLogger(JobstoreJobResultStore.class));
        this.ioExecutor = ioExecutor;
    }

    @Override
    protected void createDirtyResultInternal(JobResultEntry entry) throws IOException {
        entries.createDirty(entry.getJobId().toHexString(), FlinkJson.envelope(entry.getJobResult()));
    }

    @Override
    protected void markResultAsCleanInternal(JobID jobId) throws IOException, NoSuchElementException {
        entries.markClean(jobId.toHexString());
    }

    /** One {@code HEAD} instead of the two reads of the default implementation. */
    @Override
    public CompletableFuture<Boolean> hasJobResultEntryAsync(JobID jobId) {
        return FutureUtils.supplyAsync(() -> entries.exists(jobId.toHexString()), ioExecutor);
    }

    @Override
    protected boolean hasDirtyJobResultEntryInternal(JobID jobId) throws IOException {
        return entries.hasState(jobId.toHexString(), "dirty");
    }

    @Override
    protected boolean hasCleanJobResultEntryInternal(JobID jobId) throws IOException {
        return entries.hasState(jobId.toHexString(), "clean");
    }

    @Override
    protected Set<JobResult> getDirtyResultsInternal() throws IOException {
        return entries.dirtyResults();
    }
}
