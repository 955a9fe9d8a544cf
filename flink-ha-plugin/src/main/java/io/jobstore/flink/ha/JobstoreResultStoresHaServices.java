package io.jobstore.flink.ha;

import org.apache.flink.runtime.highavailability.HighAvailabilityServices;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.concurrent.Executor;

/**
 * Flink's own HA services of another mode (ZooKeeper or Kubernetes: leader election, execution
 * plans, applications, checkpoints, blobs) with the job result store and the application result
 * store in jobstore.
 *
 * <p>The services {@link #wrap} builds are a {@link Proxy} of {@link HighAvailabilityServices}
 * with this object as its handler: only {@code getJobResultStore()} and {@code
 * getApplicationResultStore()} are answered here; every other method of the interface, its
 * default methods included, is forwarded to the wrapped services unchanged, also a method a later
 * Flink adds (a class forwarding method by method would run a new default method against itself
 * instead of the wrapped services' own implementation). The wrapped services still build their own
 * file-based result stores in their constructor; they stay unused.
 *
 * <p>{@code cleanupAllData()} (a cluster shutting down for good) is forwarded: it removes the
 * wrapped mode's data (ZooKeeper nodes, ConfigMaps, blobs) and nothing in jobstore, whose entries
 * are the durable record of the cluster's terminated jobs and applications.
 */
public final class JobstoreResultStoresHaServices implements InvocationHandler {

    private final HighAvailabilityServices delegate;
    private final JobstoreClient client;
    private final JobstoreJobResultStore jobResultStore;
    private final JobstoreApplicationResultStore applicationResultStore;

    private JobstoreResultStoresHaServices(
            HighAvailabilityServices delegate, JobstoreClient client, Executor ioExecutor) {
        this.delegate = delegate;
        this.client = client;
        this.jobResultStore = new JobstoreJobResultStore(client, ioExecutor);
        this.applicationResultStore = new JobstoreApplicationResultStore(client, ioExecutor);
    }

    /** {@code delegate} with its job and application result stores in jobstore. */
    static HighAvailabilityServices wrap(
            HighAvailabilityServices delegate, JobstoreClient client, Executor ioExecutor) {
        return (HighAvailabilityServices)
                Proxy.newProxyInstance(
                        HighAvailabilityServices.class.getClassLoader(),
                        new Class<?>[] {HighAvailabilityServices.class},
                        new JobstoreResultStoresHaServices(delegate, client, ioExecutor));
    }

    /** The wrapper behind services {@link #wrap} built; null for any other services. */
    public static JobstoreResultStoresHaServices of(HighAvailabilityServices services) {
        if (!Proxy.isProxyClass(services.getClass())) {
            return null;
        }
        InvocationHandler handler = Proxy.getInvocationHandler(services);
        return handler instanceof JobstoreResultStoresHaServices
                ? (JobstoreResultStoresHaServices) handler
                : null;
    }

    /** The wrapped services of the configured mode. */
    public HighAvailabilityServices delegate() {
        return delegate;
    }

    JobstoreClient client() {
        return client;
    }

    @Override
    public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
        if (method.getDeclaringClass() == Object.class) {
            // equals, hashCode and toString of the proxy itself.
            switch (method.getName()) {
                case "equals":
                    return proxy == args[0];
                case "hashCode":
                    return System.identityHashCode(proxy);
                default:
                    return toString();
            }
        }
        if (method.getParameterCount() == 0) {
            switch (method.getName()) {
                case "getJobResultStore":
                    return jobResultStore;
                case "getApplicationResultStore":
                    return applicationResultStore;
                default:
                    break;
            }
        }
        try {
            return method.invoke(delegate, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "(" + delegate.getClass().getName() + ", jobstore " + client.baseUrl() + ")";
    }
}
