package io.jobstore.flink.ha;

/** Version of the plugin (sent in the User-Agent header). */
final class Version {
    static final String VERSION = "0.1.0";

    private Version() {}
}
