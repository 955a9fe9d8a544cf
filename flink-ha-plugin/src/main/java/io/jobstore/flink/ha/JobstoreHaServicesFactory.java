package io.jobstore.flink.ha;

import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.dispatcher.Dispatcher;
import org.apache.flink.runtime.highavailability.ClientHighAvailabilityServices;
import org.apache.flink.runtime.highavailability.HighAvailabilityServices;
import org.apache.flink.runtime.highavailability.HighAvailabilityServicesFactory;
import org.apache.flink.runtime.highavailability.HighAvailabilityServicesUtils;
import org.apache.flink.runtime.highavailability.nonha.standalone.StandaloneClientHAServices;
import org.apache.flink.runtime.resourcemanager.ResourceManager;
import org.apache.flink.runtime.rpc.AddressResolution;
import org.apache.flink.runtime.rpc.RpcServiceUtils;
import org.apache.flink.runtime.rpc.RpcSystem;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.Executor;

/**
 * Selected with {@code high-availability.type: io.jobstore.flink.ha.JobstoreHaServicesFactory}.
 *
 * <p>Builds the same services as Flink's {@code high-availability.type: NONE} (standalone: the
 * JobManager at {@code jobmanager.rpc.address}/{@code jobmanager.rpc.port}, the REST endpoint at
 * {@code rest.address}/{@code rest.port}), except that job results and application results are
 * kept in jobstore, so they survive a JobManager restart and can be inspected and managed there.
 * Flink creates the services in the JobManager and in every TaskManager; only the JobManager
 * talks to jobstore.
 */
public class JobstoreHaServicesFactory implements HighAvailabilityServicesFactory {

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreHaServicesFactory.class);

    @Override
    public HighAvailabilityServices createHAServices(Configuration configuration, Executor executor)
            throws Exception {
        JobstoreClient client = JobstoreClient.fromConfiguration(configuration);

        // What HighAvailabilityServicesUtils does for NONE, with the address resolution the
        // JobManager and TaskManager entry points use.
        Tuple2<String, Integer> jobManager =
                HighAvailabilityServicesUtils.getJobManagerAddress(configuration);
        String resourceManagerAddress;
        String dispatcherAddress;
        try (RpcSystem rpcSystem = RpcSystem.load(configuration)) {
            resourceManagerAddress =
                    rpcSystem.getRpcUrl(
                            jobManager.f0,
                            jobManager.f1,
                            RpcServiceUtils.createWildcardName(ResourceManager.RESOURCE_MANAGER_NAME),
                            AddressResolution.NO_ADDRESS_RESOLUTION,
                            configuration);
            dispatcherAddress =
                    rpcSystem.getRpcUrl(
                            jobManager.f0,
                            jobManager.f1,
                            RpcServiceUtils.createWildcardName(Dispatcher.DISPATCHER_NAME),
                            AddressResolution.NO_ADDRESS_RESOLUTION,
                            configuration);
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

    /** Clients (e.g. {@code flink run}) find the REST endpoint as with standalone HA. */
    @Override
    public ClientHighAvailabilityServices createClientHAServices(Configuration configuration)
            throws Exception {
        return new StandaloneClientHAServices(
                HighAvailabilityServicesUtils.getWebMonitorAddress(
                        configuration, AddressResolution.TRY_ADDRESS_RESOLUTION));
    }
}
