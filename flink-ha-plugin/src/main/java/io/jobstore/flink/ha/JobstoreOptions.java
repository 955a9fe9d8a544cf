package io.jobstore.flink.ha;

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;

import java.time.Duration;

/** The {@code jobstore.*} keys of Flink's config.yaml read by the plugin. */
public final class JobstoreOptions {

    private JobstoreOptions() {}

    /**
     * Whose HA services the plugin builds: {@code standalone} (default), {@code zookeeper},
     * {@code kubernetes}; {@code jobstore} is reserved for a later version and rejected.
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
                                    + " in jobstore.");

    /**
     * Base URL of the jobstore service, e.g. {@code http://jobstore.internal:8090}, or a
     * comma-separated list of replicas on one database. Required.
     */
    public static final ConfigOption<String> URL =
            ConfigOptions.key("jobstore.url")
                    .stringType()
                    .noDefaultValue()
                    .withDescription(
                            "Base URL of the jobstore service (http:// or https://), without the"
                                    + " /v1 prefix, or a comma-separated list of jobstore"
                                    + " replicas sharing one database. Required.");

    /**
     * Bearer token sent as {@code Authorization: Bearer <token>}. Flink masks keys containing
     * "token" in its logs and web UI.
     */
    public static final ConfigOption<String> TOKEN =
            ConfigOptions.key("jobstore.token")
                    .stringType()
                    .noDefaultValue()
                    .withDescription(
                            "Optional bearer token for jobstore (needs the write scope).");

    /** A file whose (trimmed) content is the token; used when {@link #TOKEN} is not set. */
    public static final ConfigOption<String> TOKEN_FILE =
            ConfigOptions.key("jobstore.token-file")
                    .stringType()
                    .noDefaultValue()
                    .withDescription(
                            "Optional path of a file holding the bearer token (read once at"
                                    + " start); used when jobstore.token is not set.");

    /** Connect timeout and whole-request timeout of one HTTP attempt. */
    public static final ConfigOption<Duration> TIMEOUT =
            ConfigOptions.key("jobstore.timeout")
                    .durationType()
                    .defaultValue(Duration.ofSeconds(10))
                    .withDescription("Timeout of one HTTP attempt (connect and response).");

    /** Additional attempts after a network error or a 5xx/408/429 answer. */
    public static final ConfigOption<Integer> RETRIES =
            ConfigOptions.key("jobstore.retries")
                    .intType()
                    .defaultValue(5)
                    .withDescription(
                            "How many times a call is retried after a network error or a"
                                    + " 5xx/408/429 answer before it fails with an IOException.");

    /** First pause between attempts; doubles per attempt up to {@link #RETRY_MAX_BACKOFF}. */
    public static final ConfigOption<Duration> RETRY_BACKOFF =
            ConfigOptions.key("jobstore.retry-backoff")
                    .durationType()
                    .defaultValue(Duration.ofMillis(500))
                    .withDescription(
                            "Pause before the first retry; doubled for each further retry.");

    /** Upper bound of the pause between attempts. */
    public static final ConfigOption<Duration> RETRY_MAX_BACKOFF =
            ConfigOptions.key("jobstore.retry-max-backoff")
                    .durationType()
                    .defaultValue(Duration.ofSeconds(5))
                    .withDescription("Upper bound of the pause between two attempts.");

    /** Page size of {@code getDirtyResults()}. */
    public static final ConfigOption<Integer> PAGE_SIZE =
            ConfigOptions.key("jobstore.page-size")
                    .intType()
                    .defaultValue(1000)
                    .withDescription(
                            "Entries per page when listing dirty results (1 to 10000).");
}
