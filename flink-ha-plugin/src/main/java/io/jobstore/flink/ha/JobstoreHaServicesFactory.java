package io.jobstore.flink.ha;

import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.IllegalConfigurationException;
import org.apache.flink.core.security.FlinkSecurityManager;
import org.apache.flink.runtime.dispatcher.Dispatcher;
import org.apache.flink.runtime.highavailability.ClientHighAvailabilityServices;
import org.apache.flink.runtime.highavailability.HighAvailabilityServices;
import org.apache.flink.runtime.highavailability.HighAvailabilityServicesFactory;
import org.apache.flink.runtime.highavailability.HighAvailabilityServicesUtils;
import org.apache.flink.runtime.highavailability.nonha.standalone.StandaloneClientHAServices;
import org.apache.flink.runtime.resourcemanager.ResourceManager;
import org.apache.flink.runtime.rpc.AddressResolution;
import org.apache.flink.runtime.rpc.FatalErrorHandler;
import org.apache.flink.runtime.rpc.RpcServiceUtils;
import org.apache.flink.runtime.rpc.RpcSystem;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Locale;
import java.util.concurrent.Executor;

/**
 * Selected with {@code high-availability.type: io.jobstore.flink.ha.JobstoreHaServicesFactory}.
 *
 * <p>{@code jobstore.ha.mode} chooses the rest of the HA services:
 *
 * <ul>
 *   <li>{@code standalone} (default): the same services as Flink's {@code high-availability.type:
 *       NONE} (the JobManager at {@code jobmanager.rpc.address}/{@code jobmanager.rpc.port}, the
 *       REST endpoint at {@code rest.address}/{@code rest.port});
 *   <li>{@code zookeeper} / {@code kubernetes}: Flink's own services of {@code
 *       high-availability.type: zookeeper} / {@code kubernetes}, built by Flink's {@link
 *       HighAvailabilityServicesUtils} from the same configuration, wrapped in {@link
 *       JobstoreResultStoresHaServices}.
 * </ul>
 *
 * In every mode job results and application results are kept in jobstore, so they survive a
 * JobManager restart and can be inspected and managed there. Flink creates the services in the
 * JobManager and in every TaskManager; only the JobManager talks to jobstore.
 */
public class JobstoreHaServicesFactory implements HighAvailabilityServicesFactory {

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreHaServicesFactory.class);

    /** Exit code of a process stopped by a fatal error of the wrapped services (as Flink's). */
    private static final int FATAL_EXIT_CODE = 2;

    /** The values of {@code jobstore.ha.mode}. */
    enum Mode {
        STANDALONE("standalone", null),
        ZOOKEEPER("zookeeper", "zookeeper"),
        KUBERNETES("kubernetes", "kubernetes"),
        JOBSTORE("jobstore", null);

        final String key;
        /** The {@code high-availability.type} of Flink's services of this mode (wrapped modes). */
        final String flinkType;

        Mode(String key, String flinkType) {
            this.key = key;
            this.flinkType = flinkType;
        }

        static Mode fromConfiguration(Configuration configuration) {
            String raw = configuration.get(JobstoreOptions.MODE);
            String value = raw == null ? "" : raw.trim().toLowerCase(Locale.ROOT);
            for (Mode m : values()) {
                if (m.key.equals(value)) {
                    return m;
                }
            }
            throw new IllegalConfigurationException(
                    "'"
                            + JobstoreOptions.MODE.key()
                            + "' must be standalone, zookeeper, kubernetes or jobstore, got: '"
                            + raw
                            + "'");
        }
    }

    /**
     * A copy of the configuration that makes Flink build the services of {@code mode}: only
     * {@code high-availability.type} differs.
     */
    static Configuration configurationOf(Configuration configuration, Mode mode) {
        Configuration copy = new Configuration(configuration);
        copy.set(HighAvailabilityOptions.HA_MODE, mode.flinkType);
        return copy;
    }

    @Override
    public HighAvailabilityServices createHAServices(Configuration configuration, Executor executor)
            throws Exception {
        Mode mode = Mode.fromConfiguration(configuration);
        JobstoreClient client = JobstoreClientConfig.client(configuration);
        if (mode == Mode.JOBSTORE) {
            HighAvailabilityServices services =
                    JobstoreLeaderElectionHaServices.create(configuration, executor, client);
            LOG.info(
                    "Using jobstore at {} for job and application results of cluster '{}' and for its HA"
                            + " services (jobstore.ha.mode jobstore: leader lease {}, renewed every {}).",
                    client.baseUrl(),
                    client.clusterId(),
                    configuration.get(JobstoreOptions.LEASE_DURATION),
                    configuration.get(JobstoreOptions.RENEW_INTERVAL));
            return services;
        }
        if (mode != Mode.STANDALONE) {
            return createWrapped(configuration, executor, client, mode);
        }

        // What HighAvailabilityServicesUtils does for NONE, with the address resolution the
        // JobManager and TaskManager entry points use.
        Tuple2<String, Integer> jobManager =
                HighAvailabilityServicesUtils.getJobManagerAddress(configuration);
        String resourceManagerAddress;
        String dispatcherAddress;
        try (RpcSystem rpcSystem = RpcSystem.load(configuration)) {
            resourceManagerAddress =
                    rpcUrl(rpcSystem, jobManager, ResourceManager.RESOURCE_MANAGER_NAME, configuration);
            dispatcherAddress = rpcUrl(rpcSystem, jobManager, Dispatcher.DISPATCHER_NAME, configuration);
        }
        String webMonitorAddress =
                HighAvailabilityServicesUtils.getWebMonitorAddress(
                        configuration, AddressResolution.NO_ADDRESS_RESOLUTION);

        LOG.info(
                "Using jobstore at {} for job and application results of cluster '{}'"
                        + " (standalone leader addresses: {}, {}).",
                client.baseUrl(),
                client.clusterId(),
                dispatcherAddress,
                webMonitorAddress);
        return new JobstoreHaServices(
                resourceManagerAddress, dispatcherAddress, webMonitorAddress, client, executor);
    }

    private static String rpcUrl(
            RpcSystem rpcSystem, Tuple2<String, Integer> jobManager, String endpoint, Configuration configuration)
            throws Exception {
        return rpcSystem.getRpcUrl(
                jobManager.f0,
                jobManager.f1,
                RpcServiceUtils.createWildcardName(endpoint),
                AddressResolution.NO_ADDRESS_RESOLUTION,
                configuration);
    }

    private static HighAvailabilityServices createWrapped(
            Configuration configuration, Executor executor, JobstoreClient client, Mode mode)
            throws Exception {
        // Flink's own code path for high-availability.type: zookeeper / kubernetes. The factory
        // interface passes no FatalErrorHandler; ZooKeeper's Curator reports unhandled errors to
        // this one, which stops the process as Flink's entry points do.
        HighAvailabilityServices delegate =
                HighAvailabilityServicesUtils.createAvailableOrEmbeddedServices(
                        configurationOf(configuration, mode), executor, PROCESS_FATAL_ERROR_HANDLER);
        LOG.info(
                "Using jobstore at {} for job and application results of cluster '{}'"
                        + " (jobstore.ha.mode {}: Flink's {} for leader election, execution plans"
                        + " and checkpoints).",
                client.baseUrl(),
                client.clusterId(),
                mode.key,
                delegate.getClass().getName());
        return JobstoreResultStoresHaServices.wrap(delegate, client, executor);
    }

    /** Logs a fatal error of the HA services and stops the JobManager or TaskManager process. */
    static final FatalErrorHandler PROCESS_FATAL_ERROR_HANDLER =
            error -> {
                LOG.error(
                        "Fatal error in the HA services of the jobstore plugin; stopping the process.",
                        error);
                FlinkSecurityManager.forceProcessExit(FATAL_EXIT_CODE);
            };

    /** Clients must not be stopped by an error of their HA services: it is only logged. */
    static final FatalErrorHandler CLIENT_FATAL_ERROR_HANDLER =
            error -> LOG.error("Error in the client HA services of the jobstore plugin.", error);

    /**
     * Clients (e.g. {@code flink run}) find the REST endpoint as with the mode's own services:
     * standalone at the configured address, else through ZooKeeper, Kubernetes or jobstore.
     */
    @Override
    public ClientHighAvailabilityServices createClientHAServices(Configuration configuration)
            throws Exception {
        Mode mode = Mode.fromConfiguration(configuration);
        if (mode == Mode.JOBSTORE) {
            return JobstoreLeaderElectionHaServices.createClientServices(
                    JobstoreClientConfig.client(configuration));
        }
        if (mode != Mode.STANDALONE) {
            return HighAvailabilityServicesUtils.createClientHAService(
                    configurationOf(configuration, mode), CLIENT_FATAL_ERROR_HANDLER);
        }
        return new StandaloneClientHAServices(
                HighAvailabilityServicesUtils.getWebMonitorAddress(
                        configuration, AddressResolution.TRY_ADDRESS_RESOLUTION));
    }
}
