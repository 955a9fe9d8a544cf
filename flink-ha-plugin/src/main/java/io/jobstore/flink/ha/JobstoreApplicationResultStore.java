package io.jobstore.flink.ha;

import org.apache.flink.api.common.ApplicationID;
import org.apache.flink.runtime.highavailability.AbstractThreadsafeApplicationResultStore;
import org.apache.flink.runtime.highavailability.ApplicationResult;
import org.apache.flink.runtime.highavailability.ApplicationResultEntry;
import org.apache.flink.util.concurrent.FutureUtils;

import org.slf4j.LoggerFactory;

import java.io.IOException;
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

    private final ResultEntries<ApplicationResult> entries;
    private final Executor ioExecutor;

    JobstoreApplicationResultStore(JobstoreClient client, Executor ioExecutor) {
        super(ioExecutor);
        this.entries =
                ResultEntries.applications(client, LoggerFactory.getLogger(JobstoreApplicationResultStore.class));
        this.ioExecutor = ioExecutor;
    }

    @Override
    protected void createDirtyResultInternal(ApplicationResultEntry entry) throws IOException {
        entries.createDirty(
                entry.getApplicationId().toHexString(), FlinkJson.envelope(entry.getApplicationResult()));
    }

    @Override
    protected void markResultAsCleanInternal(ApplicationID applicationId)
            throws IOException, NoSuchElementException {
        entries.markClean(applicationId.toHexString());
    }

    /** One {@code HEAD} instead of the two reads of the default implementation. */
    @Override
    public CompletableFuture<Boolean> hasApplicationResultEntryAsync(ApplicationID applicationId) {
        return FutureUtils.supplyAsync(() -> entries.exists(applicationId.toHexString()), ioExecutor);
    }

    @Override
    protected boolean hasDirtyApplicationResultEntryInternal(ApplicationID applicationId)
            throws IOException {
        return entries.hasState(applicationId.toHexString(), "dirty");
    }

    @Override
    protected boolean hasCleanApplicationResultEntryInternal(ApplicationID applicationId)
            throws IOException {
        return entries.hasState(applicationId.toHexString(), "clean");
    }

    @Override
    protected ApplicationResult getCleanApplicationResultInternal(ApplicationID applicationId)
            throws IOException {
        return entries.cleanResult(applicationId.toHexString());
    }

    @Override
    protected Set<ApplicationResult> getDirtyResultsInternal() throws IOException {
        return entries.dirtyResults();
    }
}
