package io.jobstore.flink.ha;

import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.runtime.persistence.IntegerResourceVersion;
import org.apache.flink.runtime.persistence.PossibleInconsistentStateException;
import org.apache.flink.runtime.persistence.RetrievableStateStorageHelper;
import org.apache.flink.runtime.persistence.StateHandleStore;
import org.apache.flink.runtime.state.RetrievableStateHandle;
import org.apache.flink.util.InstantiationUtil;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.ConcurrentModificationException;
import java.util.List;

/**
 * Flink's {@link StateHandleStore} on jobstore's state-handle routes: the state itself goes to a
 * file under {@code high-availability.storageDir} (Flink's {@link RetrievableStateStorageHelper}),
 * only the serialized pointer to it goes to jobstore, as one entry of a kind ({@code
 * execution-plan}, {@code application}, or {@code checkpoint} of one job). Every write names the
 * current lease (its epoch and lease id), so only the leader's writes land.
 *
 * <ul>
 *   <li>A write whose answer was lost (after the retries) may have landed: {@link
 *       PossibleInconsistentStateException}, and the new state is kept. A retry that meets the
 *       entry it wrote itself (same pointer) counts as done.
 *   <li>{@code replace} is a compare-and-set on the entry's version: on success the old state is
 *       discarded, on a mismatch the new one (a {@link ConcurrentModificationException}).
 *   <li>Entries marked for deletion count as absent ({@code exists}, {@code getAndLock}, the
 *       listings); adding over one finishes its removal first.
 *   <li>{@code releaseAndTryRemove} removes in three idempotent steps: mark for deletion, discard the
 *       state, remove the entry; a removal interrupted after any step is finished by the next call.
 *   <li>There are no locks ({@code release} and {@code releaseAll} do nothing): fencing by the
 *       lease keeps every process but the leader from changing entries.
 * </ul>
 */
final class JobstoreStateHandleStore<T extends Serializable>
        implements StateHandleStore<T, IntegerResourceVersion> {

    private static final Logger LOG = LoggerFactory.getLogger(JobstoreStateHandleStore.class);

    private final HaApi api;
    private final Leadership leadership;
    private final RetrievableStateStorageHelper<T> storage;
    private final String kind;
    /** The job of checkpoint entries, else null. */
    private final String job;

    JobstoreStateHandleStore(
            HaApi api, Leadership leadership, RetrievableStateStorageHelper<T> storage, String kind, String job) {
        this.api = api;
        this.leadership = leadership;
        this.storage = storage;
        this.kind = kind;
        this.job = job;
    }

    @Override
    public RetrievableStateHandle<T> addAndLock(String name, T state) throws Exception {
        return storeAndWrite(state, "Adding " + name + " to " + this, pointer -> {
            HaApi.Write w = add(name, pointer);
            if (w.status == 409) {
                HaApi.Handle stored = api.getHandle(kind, job, name);
                if (stored != null && stored.markedForDeletion) {
                    // A removal left unfinished (e.g. by a leader that died): finish it, then add.
                    LOG.info("{}: finishing the removal of {} before adding it again.", this, name);
                    releaseAndTryRemove(name);
                    w = add(name, pointer);
                } else if (w.retried && stored != null && Arrays.equals(stored.bytes, pointer)) {
                    LOG.info("{}: an earlier attempt of adding {} landed although its answer was lost.", this, name);
                    return;
                }
            }
            if (w.status == 409) {
                throw new AlreadyExistException(name + " already exists in " + this);
            }
        });
    }

    private HaApi.Write add(String name, byte[] pointer) throws IOException {
        return api.addHandle(leadership.heldLease(), kind, job, name, pointer);
    }

    @Override
    public void replace(String name, IntegerResourceVersion expected, T state) throws Exception {
        HaApi.Handle old = api.getHandle(kind, job, name);
        if (old == null || old.markedForDeletion) {
            throw new NotExistException("Could not find " + name + " in " + this);
        }
        if (old.version != expected.getValue()) {
            throw new ConcurrentModificationException(
                    name + " in " + this + " has version " + old.version + ", not the expected " + expected.getValue());
        }
        storeAndWrite(state, "Replacing " + name + " in " + this, pointer -> {
            HaApi.Write w = api.replaceHandle(leadership.heldLease(), kind, job, name, old.version, pointer);
            if (w.status == 409 && w.retried) {
                HaApi.Handle now = api.getHandle(kind, job, name);
                if (now != null && now.version == old.version + 1 && Arrays.equals(now.bytes, pointer)) {
                    return; // an earlier attempt landed although its answer was lost
                }
            }
            if (w.status == 404) {
                throw new NotExistException("Could not find " + name + " in " + this);
            }
            if (w.status == 409) {
                throw new ConcurrentModificationException(name + " in " + this + " changed after version " + old.version);
            }
        });
        discardQuietly(pointerOf(old), name);
    }

    /** Writes the pointer of a new state to jobstore; throws unless it landed. */
    private interface PointerWrite {
        void write(byte[] pointer) throws Exception;
    }

    /**
     * Stores the state in a file, then writes its pointer; the file is discarded unless the write
     * landed or may have landed ({@link PossibleInconsistentStateException}).
     */
    private RetrievableStateHandle<T> storeAndWrite(T state, String what, PointerWrite write) throws Exception {
        RetrievableStateHandle<T> handle = storage.store(state);
        boolean keep = false;
        try {
            write.write(InstantiationUtil.serializeObject(handle));
            keep = true;
            return handle;
        } catch (JobstoreClient.UnavailableException e) {
            keep = e.mayHaveLanded();
            throw keep ? new PossibleInconsistentStateException(what + " may or may not have landed", e) : e;
        } finally {
            if (!keep) {
                discardQuietly(handle, what);
            }
        }
    }

    @Override
    public IntegerResourceVersion exists(String name) throws Exception {
        HaApi.Handle h = api.getHandle(kind, job, name);
        if (h == null || h.markedForDeletion) {
            return IntegerResourceVersion.notExisting();
        }
        if (h.version > Integer.MAX_VALUE) {
            throw new IOException(name + " in " + this + " has version " + h.version + ", beyond Flink's int versions");
        }
        return IntegerResourceVersion.valueOf((int) h.version);
    }

    @Override
    public RetrievableStateHandle<T> getAndLock(String name) throws Exception {
        HaApi.Handle h = api.getHandle(kind, job, name);
        if (h == null) {
            throw new NotExistException("Could not find " + name + " in " + this);
        }
        if (h.markedForDeletion) {
            throw new NotExistException(name + " in " + this + " is marked for deletion");
        }
        return deserialize(h);
    }

    @Override
    public List<Tuple2<RetrievableStateHandle<T>, String>> getAllAndLock() throws Exception {
        List<Tuple2<RetrievableStateHandle<T>, String>> all = new ArrayList<>();
        for (HaApi.Handle h : api.listHandles(kind, job)) {
            if (h.markedForDeletion) {
                continue;
            }
            try {
                all.add(Tuple2.of(deserialize(h), h.name));
            } catch (IOException e) {
                LOG.warn("{}: ignoring {}, its state handle cannot be read.", this, h.name, e);
            }
        }
        return all;
    }

    @Override
    public Collection<String> getAllHandles() throws Exception {
        List<String> names = new ArrayList<>();
        for (HaApi.Handle h : api.listHandles(kind, job)) {
            if (!h.markedForDeletion) {
                names.add(h.name);
            }
        }
        return names;
    }

    @Override
    public boolean releaseAndTryRemove(String name) throws Exception {
        HaApi.Handle h = api.getHandle(kind, job, name);
        if (h == null) {
            return true;
        }
        if (!h.markedForDeletion
                && api.markForDeletion(leadership.heldLease(), kind, job, name).status == 404) {
            return true;
        }
        RetrievableStateHandle<T> state = pointerOf(h);
        if (state != null) {
            // If this fails, the entry stays marked and the next call tries again.
            state.discardState();
        }
        api.removeHandle(leadership.heldLease(), kind, job, name);
        return true;
    }

    @Override
    public void clearEntries() throws Exception {
        for (HaApi.Handle h : api.listHandles(kind, job)) {
            api.removeHandle(leadership.heldLease(), kind, job, h.name);
        }
    }

    @Override
    public void release(String name) {
        // no locks: fencing by the lease takes their place
    }

    @Override
    public void releaseAll() {
        // no locks
    }

    private RetrievableStateHandle<T> deserialize(HaApi.Handle h) throws IOException {
        try {
            return InstantiationUtil.deserializeObject(h.bytes, Thread.currentThread().getContextClassLoader());
        } catch (ClassNotFoundException | RuntimeException e) {
            throw new IOException("Cannot read the state handle of " + h.name + " in " + this, e);
        }
    }

    /** The stored pointer, or null (logged) when it cannot be read. */
    private RetrievableStateHandle<T> pointerOf(HaApi.Handle h) {
        try {
            return deserialize(h);
        } catch (IOException e) {
            LOG.warn("{}: the state of {} cannot be discarded, its state handle cannot be read.", this, h.name, e);
            return null;
        }
    }

    private void discardQuietly(RetrievableStateHandle<T> handle, String what) {
        if (handle == null) {
            return;
        }
        try {
            handle.discardState();
        } catch (Exception e) {
            LOG.warn("{}: could not discard a state ({}).", this, what, e);
        }
    }

    @Override
    public String toString() {
        return "JobstoreStateHandleStore{cluster=" + api.clusterId() + ", kind=" + kind + (job == null ? "" : ", job=" + job) + "}";
    }
}
