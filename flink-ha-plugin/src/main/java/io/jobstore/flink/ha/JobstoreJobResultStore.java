package io.jobstore.flink.ha;

import org.apache.flink.api.common.JobID;
import org.apache.flink.runtime.highavailability.AbstractThreadsafeJobResultStore;
import org.apache.flink.runtime.highavailability.JobResultEntry;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.util.concurrent.FutureUtils;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.HashSet;
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

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreJobResultStore.class);
    private static final JobstoreClient.Kind KIND = JobstoreClient.Kind.JOB;

    private final JobstoreClient client;
    private final Executor ioExecutor;

    JobstoreJobResultStore(JobstoreClient client, Executor ioExecutor) {
        super(ioExecutor);
        this.client = client;
        this.ioExecutor = ioExecutor;
    }

    @Override
    protected void createDirtyResultInternal(JobResultEntry entry) throws IOException {
        String id = entry.getJobId().toHexString();
        client.createDirty(KIND, id, FlinkJson.envelope(entry.getJobResult()));
        LOG.info("Stored dirty job result of job {} in jobstore (cluster {}).", id, client.clusterId());
    }

    @Override
    protected void markResultAsCleanInternal(JobID jobId) throws IOException, NoSuchElementException {
        client.markClean(KIND, jobId.toHexString());
        LOG.info("Marked job result of job {} as clean in jobstore (cluster {}).", jobId, client.clusterId());
    }

    /** One {@code HEAD} instead of the two reads of the default implementation. */
    @Override
    public CompletableFuture<Boolean> hasJobResultEntryAsync(JobID jobId) {
        return FutureUtils.supplyAsync(() -> client.exists(KIND, jobId.toHexString()), ioExecutor);
    }

    @Override
    protected boolean hasDirtyJobResultEntryInternal(JobID jobId) throws IOException {
        return "dirty".equals(state(client.get(KIND, jobId.toHexString())));
    }

    @Override
    protected boolean hasCleanJobResultEntryInternal(JobID jobId) throws IOException {
        return "clean".equals(state(client.get(KIND, jobId.toHexString())));
    }

    @Override
    protected Set<JobResult> getDirtyResultsInternal() throws IOException {
        Set<JobResult> results = new HashSet<>();
        int skipped = 0;
        for (JsonNode entry : client.listDirty(KIND)) {
            String id = entry.path("job-id").asText("?");
            try {
                if (!"dirty".equals(state(entry))) {
                    continue;
                }
                JobResult result = FlinkJson.jobResult(entry.get("result"));
                if (!result.getJobId().toHexString().equals(id) && !"?".equals(id)) {
                    throw new IOException("result.id " + result.getJobId() + " differs from job-id " + id);
                }
                results.add(result);
            } catch (IOException | RuntimeException e) {
                // Unlike FileSystemJobResultStore, one unreadable entry does not block the
                // recovery of all the others.
                skipped++;
                LOG.error(
                        "Skipping the dirty job result of job {} in jobstore (cluster {}): it cannot"
                                + " be read as a Flink JobResult. Inspect or delete it with"
                                + " jobstore's API (DELETE /v1/clusters/{}/job-results/{}).",
                        id,
                        client.clusterId(),
                        client.clusterId(),
                        id,
                        e);
            }
        }
        LOG.info(
                "Found {} dirty job result(s) in jobstore (cluster {}){}.",
                results.size(),
                client.clusterId(),
                skipped == 0 ? "" : ", skipped " + skipped + " unreadable one(s)");
        return results;
    }

    static String state(JsonNode entry) {
        return entry == null ? null : entry.path("state").asText(null);
    }
}
