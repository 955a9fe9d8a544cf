package io.jobstore.flink.ha;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.IllegalConfigurationException;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * The plugin's configuration of its jobstore client: the {@code jobstore.*} keys of {@link
 * JobstoreOptions} and Flink's HA cluster id, read and validated once, with errors that name the
 * key.
 */
final class JobstoreClientConfig {

    private static final Pattern CLUSTER_ID = Pattern.compile("[A-Za-z0-9._-]{1,128}");

    private JobstoreClientConfig() {}

    /** Reads and validates the {@code jobstore.*} keys and the HA cluster id. */
    static JobstoreClient client(Configuration config) {
        String url = config.get(JobstoreOptions.URL);
        if (url == null || url.trim().isEmpty()) {
            throw new IllegalConfigurationException(
                    "The jobstore HA services need '"
                            + JobstoreOptions.URL.key()
                            + "' (e.g. http://127.0.0.1:8090) in Flink's configuration.");
        }
        List<String> replicas = new ArrayList<>();
        for (String part : url.split(",", -1)) {
            String one = part.trim();
            if (one.isEmpty()) {
                throw new IllegalConfigurationException(
                        "'"
                                + JobstoreOptions.URL.key()
                                + "' has an empty entry in its comma-separated list: "
                                + url);
            }
            validateUrl(one);
            if (replicas.contains(one.replaceAll("/+$", ""))) {
                throw new IllegalConfigurationException(
                        "'" + JobstoreOptions.URL.key() + "' lists " + one + " twice");
            }
            replicas.add(one.replaceAll("/+$", ""));
        }
        url = String.join(",", replicas);

        String token = config.get(JobstoreOptions.TOKEN);
        if ((token == null || token.trim().isEmpty()) && config.get(JobstoreOptions.TOKEN_FILE) != null) {
            String file = config.get(JobstoreOptions.TOKEN_FILE);
            try {
                token = new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new IllegalConfigurationException(
                        "Cannot read '" + JobstoreOptions.TOKEN_FILE.key() + "' " + file + ": " + e,
                        e);
            }
        }
        token = token == null ? null : token.trim();
        if (token != null && !token.isEmpty() && !token.matches("[\\x21-\\x7e]+")) {
            throw new IllegalConfigurationException(
                    "The jobstore token must be printable ASCII without spaces.");
        }

        Duration timeout = config.get(JobstoreOptions.TIMEOUT);
        if (timeout.isZero() || timeout.isNegative()) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.TIMEOUT.key() + "' must be positive, got " + timeout);
        }
        int retries = config.get(JobstoreOptions.RETRIES);
        if (retries < 0) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.RETRIES.key() + "' must be >= 0, got " + retries);
        }
        Duration backoff = config.get(JobstoreOptions.RETRY_BACKOFF);
        Duration maxBackoff = config.get(JobstoreOptions.RETRY_MAX_BACKOFF);
        if (backoff.isNegative() || maxBackoff.isNegative()) {
            throw new IllegalConfigurationException("jobstore retry backoffs must not be negative");
        }
        int pageSize = config.get(JobstoreOptions.PAGE_SIZE);
        if (pageSize < 1 || pageSize > 10000) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.PAGE_SIZE.key() + "' must be 1..10000, got " + pageSize);
        }
        return new JobstoreClient(
                url, clusterId(config), token, timeout, retries, backoff, maxBackoff, pageSize);
    }

    private static void validateUrl(String url) {
        URI uri;
        try {
            uri = URI.create(url);
        } catch (IllegalArgumentException e) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.URL.key() + "' is not a URL: " + url, e);
        }
        if (!"http".equalsIgnoreCase(uri.getScheme()) && !"https".equalsIgnoreCase(uri.getScheme())
                || uri.getHost() == null) {
            throw new IllegalConfigurationException(
                    "'"
                            + JobstoreOptions.URL.key()
                            + "' must be an http:// or https:// URL with a host, got: "
                            + url);
        }
        if (uri.getQuery() != null || uri.getFragment() != null) {
            throw new IllegalConfigurationException(
                    "'" + JobstoreOptions.URL.key() + "' must not have a query or fragment: " + url);
        }
    }

    /**
     * The cluster id of the entries: Flink's {@code high-availability.cluster-id} without leading
     * slashes (Flink's default is "/default", a ZooKeeper-style path, which becomes "default").
     */
    static String clusterId(Configuration config) {
        String raw = config.get(HighAvailabilityOptions.HA_CLUSTER_ID);
        String id = raw == null ? "" : raw.trim().replaceFirst("^/+", "");
        if (!CLUSTER_ID.matcher(id).matches()) {
            throw new IllegalConfigurationException(
                    "'"
                            + HighAvailabilityOptions.HA_CLUSTER_ID.key()
                            + "' must be 1 to 128 of [A-Za-z0-9._-] (after leading slashes) for"
                            + " jobstore, got: '"
                            + raw
                            + "'");
        }
        return id;
    }

}
