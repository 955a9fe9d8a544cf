package io.jobstore.flink.ha;

import org.apache.flink.api.common.ApplicationID;
import org.apache.flink.runtime.highavailability.AbstractThreadsafeApplicationResultStore;
import org.apache.flink.runtime.highavailability.ApplicationResult;
import org.apache.flink.runtime.highavailability.ApplicationResultEntry;
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
 * An {@link org.apache.flink.runtime.highavailability.ApplicationResultStore} (Flink 2.3) kept in
 * jobstore under {@code /v1/clusters/{cluster-id}/application-results}. Entries hold exactly what
 * Flink's {@code FileSystemApplicationResultStore} writes into its files.
 */
public class JobstoreApplicationResultStore extends AbstractThreadsafeApplicationResultStore {

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreApplicationResultStore.class);
    private static final JobstoreClient.Kind KIND = JobstoreClient.Kind.APPLICATION;

    private final JobstoreClient client;
    private final Executor ioExecutor;

    JobstoreApplicationResultStore(JobstoreClient client, Executor ioExecutor) {
        super(ioExecutor);
        this.client = client;
        this.ioExecutor = ioExecutor;
    }

    @Override
    protected void createDirtyResultInternal(ApplicationResultEntry entry) throws IOException {
        String id = entry.getApplicationId().toHexString();
        client.createDirty(KIND, id, FlinkJson.envelope(entry.getApplicationResult()));
        LOG.info(
                "Stored dirty application result of application {} in jobstore (cluster {}).",
                id,
                client.clusterId());
    }

    @Override
    protected void markResultAsCleanInternal(ApplicationID applicationId)
            throws IOException, NoSuchElementException {
        client.markClean(KIND, applicationId.toHexString());
        LOG.info(
                "Marked application result of application {} as clean in jobstore (cluster {}).",
                applicationId,
                client.clusterId());
    }

    /** One {@code HEAD} instead of the two reads of the default implementation. */
    @Override
    public CompletableFuture<Boolean> hasApplicationResultEntryAsync(ApplicationID applicationId) {
        return FutureUtils.supplyAsync(
                () -> client.exists(KIND, applicationId.toHexString()), ioExecutor);
    }

    @Override
    protected boolean hasDirtyApplicationResultEntryInternal(ApplicationID applicationId)
            throws IOException {
        return "dirty".equals(JobstoreJobResultStore.state(client.get(KIND, applicationId.toHexString())));
    }

    @Override
    protected boolean hasCleanApplicationResultEntryInternal(ApplicationID applicationId)
            throws IOException {
        return "clean".equals(JobstoreJobResultStore.state(client.get(KIND, applicationId.toHexString())));
    }

    @Override
    protected ApplicationResult getCleanApplicationResultInternal(ApplicationID applicationId)
            throws IOException {
        JsonNode entry = client.get(KIND, applicationId.toHexString());
        if (!"clean".equals(JobstoreJobResultStore.state(entry))) {
            return null;
        }
        return FlinkJson.applicationResult(entry.get("result"));
    }

    @Override
    protected Set<ApplicationResult> getDirtyResultsInternal() throws IOException {
        Set<ApplicationResult> results = new HashSet<>();
        int skipped = 0;
        for (JsonNode entry : client.listDirty(KIND)) {
            String id = entry.path("application-id").asText("?");
            try {
                if (!"dirty".equals(JobstoreJobResultStore.state(entry))) {
                    continue;
                }
                ApplicationResult result = FlinkJson.applicationResult(entry.get("result"));
                if (!result.getApplicationId().toHexString().equals(id) && !"?".equals(id)) {
                    throw new IOException(
                            "result.application-id " + result.getApplicationId() + " differs from application-id " + id);
                }
                results.add(result);
            } catch (IOException | RuntimeException e) {
                skipped++;
                LOG.error(
                        "Skipping the dirty application result of application {} in jobstore"
                                + " (cluster {}): it cannot be read as a Flink ApplicationResult."
                                + " Inspect or delete it with jobstore's API (DELETE"
                                + " /v1/clusters/{}/application-results/{}).",
                        id,
                        client.clusterId(),
                        client.clusterId(),
                        id,
                        e);
            }
        }
        LOG.info(
                "Found {} dirty application result(s) in jobstore (cluster {}){}.",
                results.size(),
                client.clusterId(),
                skipped == 0 ? "" : ", skipped " + skipped + " unreadable one(s)");
        return results;
    }
}
