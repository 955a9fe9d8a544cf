package io.jobstore.flink.ha;

import org.apache.flink.runtime.highavailability.ApplicationResult;
import org.apache.flink.runtime.jobmaster.JobResult;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

import org.slf4j.Logger;

import java.io.IOException;
import java.util.HashSet;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.function.Function;

/**
 * What the job result store and the application result store do alike: entries of one {@link
 * ResultStoreApi.Kind} in jobstore, read as Flink's {@code JobResult} or {@code ApplicationResult}.
 *
 * @param <R> Flink's result type
 */
final class ResultEntries<R> {

    /** Reads Flink's result from the entry's {@code result} field. */
    interface Reader<R> {
        R read(JsonNode result) throws IOException;
    }

    private final ResultStoreApi client;
    private final ResultStoreApi.Kind kind;
    private final Reader<R> reader;
    private final Function<R, String> idOf;
    /** The logger of the store, so that its log lines name it. */
    private final Logger log;

    private ResultEntries(ResultStoreApi client, ResultStoreApi.Kind kind, Reader<R> reader, Function<R, String> idOf, Logger log) {
        this.client = client;
        this.kind = kind;
        this.reader = reader;
        this.idOf = idOf;
        this.log = log;
    }

    /** The entries of Flink's job result store. */
    static ResultEntries<JobResult> jobs(JobstoreClient client, Logger log) {
        return new ResultEntries<>(new ResultStoreApi(client), ResultStoreApi.Kind.JOB, FlinkJson::jobResult, r -> r.getJobId().toHexString(), log);
    }

    /** The entries of Flink's application result store. */
    static ResultEntries<ApplicationResult> applications(JobstoreClient client, Logger log) {
        return new ResultEntries<>(
                new ResultStoreApi(client), ResultStoreApi.Kind.APPLICATION, FlinkJson::applicationResult, r -> r.getApplicationId().toHexString(), log);
    }

    void createDirty(String id, byte[] envelope) throws IOException {
        client.createDirty(kind, id, envelope);
        log.info("Stored dirty {} result of {} {} in jobstore (cluster {}).", kind.noun, kind.noun, id, client.clusterId());
    }

    void markClean(String id) throws IOException, NoSuchElementException {
        client.markClean(kind, id);
        log.info("Marked {} result of {} {} as clean in jobstore (cluster {}).", kind.noun, kind.noun, id, client.clusterId());
    }

    boolean exists(String id) throws IOException {
        return client.exists(kind, id);
    }

    boolean hasState(String id, String state) throws IOException {
        return state.equals(state(client.get(kind, id)));
    }

    /** The result when the entry is clean, else null. */
    R cleanResult(String id) throws IOException {
        JsonNode entry = client.get(kind, id);
        return "clean".equals(state(entry)) ? reader.read(entry.get("result")) : null;
    }

    /** Every dirty result; an unreadable entry is logged and skipped. */
    Set<R> dirtyResults() throws IOException {
        Set<R> results = new HashSet<>();
        int skipped = 0;
        for (JsonNode entry : client.listDirty(kind)) {
            String id = entry.path(kind.idField).asText("?");
            try {
                if (!"dirty".equals(state(entry))) {
                    continue;
                }
                R result = reader.read(entry.get("result"));
                if (!idOf.apply(result).equals(id) && !"?".equals(id)) {
                    throw new IOException("the result's id " + idOf.apply(result) + " differs from " + kind.idField + " " + id);
                }
                results.add(result);
            } catch (IOException | RuntimeException e) {
                // Unlike Flink's file stores, one unreadable entry does not block the recovery
                // of all the others.
                skipped++;
                log.error(
                        "Skipping the dirty {} result of {} {} in jobstore (cluster {}): it cannot be read as a"
                                + " Flink {}. Inspect or delete it with jobstore's API (DELETE /v1/clusters/{}/{}/{}).",
                        kind.noun,
                        kind.noun,
                        id,
                        client.clusterId(),
                        kind.flinkType,
                        client.clusterId(),
                        kind.collection,
                        id,
                        e);
            }
        }
        log.info(
                "Found {} dirty {} result(s) in jobstore (cluster {}){}.",
                results.size(),
                kind.noun,
                client.clusterId(),
                skipped == 0 ? "" : ", skipped " + skipped + " unreadable one(s)");
        return results;
    }

    private static String state(JsonNode entry) {
        return entry == null ? null : entry.path("state").asText(null);
    }
}
