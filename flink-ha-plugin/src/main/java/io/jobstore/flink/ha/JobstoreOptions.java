package io.jobstore.flink.ha;

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;

import java.time.Duration;

/** The {@code jobstore.*} keys of Flink's config.yaml read by the plugin. */
public final class JobstoreOptions {

    private JobstoreOptions() {}

    /**
     * Whose HA services the plugin builds: {@code standalone} (default), {@code zookeeper},
     * {@code kubernetes} or {@code jobstore}.
     */
    public static final ConfigOption<String> MODE =
            ConfigOptions.key("jobstore.ha.mode")
                    .stringType()
                    .defaultValue("standalone")
                    .withDescription(
                            "standalone: Flink's standalone HA services (one JobManager at a fixed"
                                    + " address); zookeeper / kubernetes: Flink's own ZooKeeper or"
                                    + " Kubernetes HA services (leader election, execution plans,"
                                    + " checkpoints), with only the job and application results"
                                    + " in jobstore; jobstore: everything in jobstore (leader"
                                    + " lease, leader information, execution plans, applications,"
                                    + " checkpoint pointers and counters), the state files under"
                                    + " high-availability.storageDir.");

    /**
     * Base URL of the jobstore service, e.g. {@code http://jobstore.internal:8090}, or a
     * comma-separated list of replicas on one database. Required.
     */
    public static final ConfigOption<String> URL =
            text(
                    "jobstore.url",
                    "Base URL of the jobstore service (http:// or https://), without the /v1 prefix,"
                            + " or a comma-separated list of jobstore replicas sharing one database."
                            + " Required.");

    /**
     * Bearer token sent as {@code Authorization: Bearer <token>}. Flink masks keys containing
     * "token" in its logs and web UI.
     */
    public static final ConfigOption<String> TOKEN =
            text("jobstore.token", "Optional bearer token for jobstore (needs the write scope).");

    /** A file whose (trimmed) content is the token; used when {@link #TOKEN} is not set. */
    public static final ConfigOption<String> TOKEN_FILE =
            text(
                    "jobstore.token-file",
                    "Optional path of a file holding the bearer token (read once at start); used"
                            + " when jobstore.token is not set.");

    /** Connect timeout and whole-exchange timeout of one HTTP attempt (the answer's body included). */
    public static final ConfigOption<Duration> TIMEOUT =
            duration(
                    "jobstore.timeout",
                    Duration.ofSeconds(10),
                    "Timeout of one HTTP attempt (connect, and the whole answer, body included).");

    /** Additional attempts after a network error or a 5xx/408/429 answer. */
    public static final ConfigOption<Integer> RETRIES =
            number(
                    "jobstore.retries",
                    5,
                    "How many times a call is retried after a network error or a 5xx/408/429 answer"
                            + " before it fails with an IOException.");

    /** First pause between attempts; doubles per attempt up to {@link #RETRY_MAX_BACKOFF}. */
    public static final ConfigOption<Duration> RETRY_BACKOFF =
            duration(
                    "jobstore.retry-backoff",
                    Duration.ofMillis(500),
                    "Pause before the first retry; doubled for each further retry.");

    /** Upper bound of the pause between attempts. */
    public static final ConfigOption<Duration> RETRY_MAX_BACKOFF =
            duration(
                    "jobstore.retry-max-backoff",
                    Duration.ofSeconds(5),
                    "Upper bound of the pause between two attempts.");

    /** Page size of {@code getDirtyResults()}. */
    public static final ConfigOption<Integer> PAGE_SIZE =
            number(
                    "jobstore.page-size",
                    1000,
                    "Entries per page when listing dirty results (1 to 10000).");

    /** {@code jobstore.ha.mode: jobstore}: how long a JobManager's leader lease lasts unrenewed. */
    public static final ConfigOption<Duration> LEASE_DURATION =
            duration(
                    "jobstore.ha.lease-duration",
                    Duration.ofSeconds(15),
                    "jobstore mode: how long the leader lease of a JobManager lasts without a"
                            + " renewal; a standby takes over this long after the leader's last"
                            + " renewal (at once after a release). The leader gives up its leadership"
                            + " before the lease can expire when it cannot renew it.");

    /** {@code jobstore.ha.mode: jobstore}: how often the leader renews its lease. */
    public static final ConfigOption<Duration> RENEW_INTERVAL =
            duration(
                    "jobstore.ha.renew-interval",
                    Duration.ofSeconds(5),
                    "jobstore mode: how often the leader renews its lease (and how often a standby"
                            + " tries to acquire it when jobstore does not tell when the lease"
                            + " expires); must be shorter than jobstore.ha.lease-duration.");

    private static ConfigOption<String> text(String key, String description) {
        return ConfigOptions.key(key).stringType().noDefaultValue().withDescription(description);
    }

    private static ConfigOption<Duration> duration(String key, Duration byDefault, String description) {
        return ConfigOptions.key(key).durationType().defaultValue(byDefault).withDescription(description);
    }

    private static ConfigOption<Integer> number(String key, int byDefault, String description) {
        return ConfigOptions.key(key).intType().defaultValue(byDefault).withDescription(description);
    }
}
