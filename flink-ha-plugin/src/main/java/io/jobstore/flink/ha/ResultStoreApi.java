package io.jobstore.flink.ha;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.regex.Pattern;

/**
 * jobstore's result store API ({@code /v1/clusters/{cluster}/job-results} and {@code
 * /v1/clusters/{cluster}/application-results}) over the plugin's transport ({@link
 * JobstoreClient}: retries, replicas), with the error mapping Flink's stores expect:
 *
 * <ul>
 *   <li>409 on create: {@link IllegalStateException};
 *   <li>404 on mark-clean: {@link NoSuchElementException};
 *   <li>what the transport gives up on (network errors, timeouts, 5xx, 408 and 429 after their
 *       retries): an {@link IOException};
 *   <li>any other unexpected answer (400, 401, 403, ...): an {@link IOException} at once.
 * </ul>
 *
 * <p>Every call is retried, create included: a retried create can meet a 409 caused by an earlier
 * attempt of the same call that reached the server although its answer was lost. Only in that
 * case the entry is read back; when it is dirty and its result equals the one being created, the
 * create counts as done. Otherwise (the first attempt answered 409, or the stored entry is clean
 * or differs) the 409 is an {@link IllegalStateException}, as Flink's contract asks.
 */
final class ResultStoreApi {

    private static final Logger LOG = LoggerFactory.getLogger(ResultStoreApi.class);

    private static final Pattern ID = Pattern.compile("[0-9a-f]{32}");

    /** The two kinds of result stores; they differ only in names. */
    enum Kind {
        JOB("job-results", "job", "job-id", "JobResult", "job result store", "Job result store"),
        APPLICATION(
                "application-results",
                "application",
                "application-id",
                "ApplicationResult",
                "application result store",
                "Application result store");

        final String collection;
        final String noun;
        /** The entry's field naming its id. */
        final String idField;
        /** Flink's class of the result. */
        final String flinkType;
        final String storeName;
        final String storeTitle;

        Kind(String collection, String noun, String idField, String flinkType, String storeName, String storeTitle) {
            this.collection = collection;
            this.noun = noun;
            this.idField = idField;
            this.flinkType = flinkType;
            this.storeName = storeName;
            this.storeTitle = storeTitle;
        }
    }

    private final JobstoreClient client;

    ResultStoreApi(JobstoreClient client) {
        this.client = client;
    }

    JobstoreClient client() {
        return client;
    }

    String clusterId() {
        return client.clusterId();
    }

    /**
     * {@code POST .../{collection}} with a Flink JRS/ARS file as body.
     *
     * @throws IllegalStateException if the id is already registered (dirty or clean)
     */
    void createDirty(Kind kind, String id, byte[] envelope) throws IOException {
        String path = collectionPath(kind);
        JobstoreClient.Outcome out = client.call("POST", path, envelope);
        if (out.status == 201 || out.status == 200) {
            return;
        }
        if (out.status == 409) {
            if (out.earlierAttemptMayHaveLanded && ourEarlierCreateLanded(kind, id, envelope)) {
                LOG.info(
                        "An earlier attempt of creating the dirty {} entry {} in jobstore"
                                + " succeeded although its answer was lost; treating the create"
                                + " as done.",
                        kind.noun,
                        id);
                return;
            }
            throw new IllegalStateException(
                    JobstoreClient.errorMessage(
                            out.body,
                            String.format(
                                    "%s already contains an entry for %s %s",
                                    kind.storeTitle, kind.noun, id)));
        }
        throw client.unexpected("POST", path, out);
    }

    private boolean ourEarlierCreateLanded(Kind kind, String id, byte[] envelope) throws IOException {
        JsonNode stored = get(kind, id);
        if (stored == null || !"dirty".equals(stored.path("state").asText())) {
            return false;
        }
        JsonNode sent = FlinkJson.parse(envelope).get("result");
        return FlinkJson.sameJson(sent, stored.get("result"));
    }

    /** {@code GET .../{collection}/{id}}: the entry, or null when there is none. */
    JsonNode get(Kind kind, String id) throws IOException {
        String path = entryPath(kind, id);
        JobstoreClient.Outcome out = client.call("GET", path, null);
        if (out.status == 200) {
            return JobstoreClient.parseObject("GET", path, out.body);
        }
        if (out.status == 404) {
            return null;
        }
        throw client.unexpected("GET", path, out);
    }

    /** {@code HEAD .../{collection}/{id}}: whether an entry (dirty or clean) exists. */
    boolean exists(Kind kind, String id) throws IOException {
        String path = entryPath(kind, id);
        JobstoreClient.Outcome out = client.call("HEAD", path, null);
        if (out.status == 200) {
            return true;
        }
        if (out.status == 404) {
            return false;
        }
        throw client.unexpected("HEAD", path, out);
    }

    /**
     * {@code POST .../{collection}/{id}/clean}; an entry that is already clean stays as it is.
     *
     * @throws NoSuchElementException if there is no entry for the id
     */
    void markClean(Kind kind, String id) throws IOException {
        String path = entryPath(kind, id) + "/clean";
        JobstoreClient.Outcome out = client.call("POST", path, null);
        if (out.status == 200 || out.status == 204) {
            return;
        }
        if (out.status == 404) {
            throw new NoSuchElementException(
                    String.format(
                            "Could not mark %s %s as clean as it is not present in the %s.",
                            kind.noun, id, kind.storeName));
        }
        throw client.unexpected("POST", path, out);
    }

    /** All dirty entries, following {@code next} page by page until it is null. */
    List<JsonNode> listDirty(Kind kind) throws IOException {
        List<JsonNode> entries = new ArrayList<>();
        String after = null;
        int pages = 0;
        while (true) {
            String path =
                    collectionPath(kind)
                            + "?state=dirty&limit="
                            + client.pageSize()
                            + (after == null
                                    ? ""
                                    : "&after=" + URLEncoder.encode(after, StandardCharsets.UTF_8));
            JobstoreClient.Outcome out = client.call("GET", path, null);
            if (out.status != 200) {
                throw client.unexpected("GET", path, out);
            }
            JsonNode page = JobstoreClient.parseObject("GET", path, out.body);
            JsonNode items = page.get(kind.collection);
            if (items == null || !items.isArray()) {
                throw new IOException(
                        "jobstore GET " + path + ": answer has no '" + kind.collection + "' array");
            }
            items.forEach(entries::add);
            pages++;
            JsonNode next = page.get("next");
            if (next == null || next.isNull()) {
                break;
            }
            String cursor = next.asText();
            if (cursor.isEmpty() || cursor.equals(after) || items.size() == 0) {
                throw new IOException(
                        "jobstore GET "
                                + path
                                + ": paging does not advance (next="
                                + cursor
                                + ", "
                                + items.size()
                                + " entries)");
            }
            after = cursor;
        }
        LOG.debug("Listed {} dirty {} entries of cluster {} in {} page(s)", entries.size(), kind.noun, client.clusterId(), pages);
        return entries;
    }

    private String collectionPath(Kind kind) {
        return "/v1/clusters/" + client.clusterId() + "/" + kind.collection;
    }

    private String entryPath(Kind kind, String id) {
        if (!ID.matcher(id).matches()) {
            throw new IllegalArgumentException("not a 32-hex-digit lowercase id: " + id);
        }
        return collectionPath(kind) + "/" + id;
    }
}
