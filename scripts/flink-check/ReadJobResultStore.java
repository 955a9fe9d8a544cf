// Reads a `jobstore export` directory with Flink 2.3.0's own result stores and prints what
// Flink sees, one JSON object per line on stdout (logs go to stderr).
//
// Usage: java -cp "<classes>:$FLINK_HOME/lib/*" ReadJobResultStore EXPORT_DIR
//   (scripts/flink-check/run.sh compiles and runs it)
//
// EXPORT_DIR/job-result-store is opened with FileSystemJobResultStore.fromConfiguration
// (job-result-store.storage-path = that folder, delete-on-commit off), exactly as a
// JobManager opens its store. For every entry file (Flink's own file-name checks decide
// which files are entries) it asks the store hasDirtyJobResultEntry / hasCleanJobResultEntry,
// and it calls getDirtyResults(), the call a JobManager makes at start. Flink's job store
// has no call that reads a clean entry, so clean files are read through the same code:
// each is copied as <id>_DIRTY.json into a scratch folder, and a second
// FileSystemJobResultStore on that folder reads them with getDirtyResults().
//
// EXPORT_DIR/application-result-store is opened with
// FileSystemApplicationResultStore.fromConfiguration: hasDirty/hasClean for every entry,
// getDirtyResults(), and getCleanApplicationResult(id) for the clean ones.
//
// Lines:
//   {"store":"job","job-id":..,"has-dirty":..,"has-clean":..,"in-dirty-results":..,
//    "job-status":..,"net-runtime":..,"name":..,"application-id":..,"start-time":..,
//    "end-time":..,"failure-class":..}
//   {"store":"application","application-id":..,"has-dirty":..,"has-clean":..,
//    "in-dirty-results":..,"application-state":..,"application-name":..,"start-time":..,
//    "end-time":..}
// A folder that is missing prints nothing. Any exception: stack trace on stderr, exit 1.

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Executor;

import org.apache.flink.api.common.ApplicationID;
import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.highavailability.ApplicationResult;
import org.apache.flink.runtime.highavailability.ApplicationResultStoreOptions;
import org.apache.flink.runtime.highavailability.FileSystemApplicationResultStore;
import org.apache.flink.runtime.highavailability.FileSystemJobResultStore;
import org.apache.flink.runtime.highavailability.JobResultStoreOptions;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

public final class ReadJobResultStore {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Executor DIRECT = Runnable::run;
    private static final String DIRTY = "_DIRTY.json";
    private static final String CLEAN = ".json";

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: ReadJobResultStore EXPORT_DIR");
            System.exit(2);
        }
        Path root = Path.of(args[0]).toAbsolutePath();
        if (!Files.isDirectory(root)) {
            throw new IllegalArgumentException(root + " is not a directory");
        }
        Path jobs = root.resolve("job-result-store");
        if (Files.isDirectory(jobs)) {
            readJobs(jobs);
        }
        Path applications = root.resolve("application-result-store");
        if (Files.isDirectory(applications)) {
            readApplications(applications);
        }
        System.out.flush();
    }

    /** An entry's file: its id and whether Flink's own name check calls it dirty. */
    private record EntryFile(String id, String name, boolean dirty) {}

    /** The entry files of a job store folder, by Flink's own file-name checks. */
    private static List<EntryFile> jobEntryFiles(Path dir) {
        List<EntryFile> entries = new ArrayList<>();
        for (File f : listFiles(dir)) {
            String name = f.getName();
            if (f.isDirectory() || !FileSystemJobResultStore.hasValidJobResultStoreEntryExtension(name)) {
                continue;
            }
            boolean dirty = FileSystemJobResultStore.hasValidDirtyJobResultStoreEntryExtension(name);
            entries.add(new EntryFile(stripSuffix(name, dirty), name, dirty));
        }
        return entries;
    }

    /** The entry files of an application store folder, by Flink's own file-name checks. */
    private static List<EntryFile> applicationEntryFiles(Path dir) {
        List<EntryFile> entries = new ArrayList<>();
        for (File f : listFiles(dir)) {
            String name = f.getName();
            if (f.isDirectory()
                    || !FileSystemApplicationResultStore.hasValidApplicationResultStoreEntryExtension(name)) {
                continue;
            }
            boolean dirty =
                    FileSystemApplicationResultStore.hasValidDirtyApplicationResultStoreEntryExtension(name);
            entries.add(new EntryFile(stripSuffix(name, dirty), name, dirty));
        }
        return entries;
    }

    private static File[] listFiles(Path dir) {
        File[] files = dir.toFile().listFiles();
        if (files == null) {
            throw new IllegalStateException("cannot list " + dir);
        }
        return files;
    }

    private static String stripSuffix(String name, boolean dirty) {
        return name.substring(0, name.length() - (dirty ? DIRTY.length() : CLEAN.length()));
    }

    private static Configuration jobConfig(Path dir) {
        Configuration config = new Configuration();
        config.set(JobResultStoreOptions.STORAGE_PATH, dir.toUri().toString());
        config.set(JobResultStoreOptions.DELETE_ON_COMMIT, false);
        return config;
    }

    private static void readJobs(Path dir) throws Exception {
        FileSystemJobResultStore store = FileSystemJobResultStore.fromConfiguration(jobConfig(dir), DIRECT);
        TreeSet<String> ids = new TreeSet<>();
        List<String> cleanFiles = new ArrayList<>();
        for (EntryFile e : jobEntryFiles(dir)) {
            ids.add(e.id());
            if (!e.dirty()) {
                cleanFiles.add(e.name());
            }
        }

        Map<JobID, JobResult> dirtyResults = new HashMap<>();
        for (JobResult r : store.getDirtyResults()) {
            dirtyResults.put(r.getJobId(), r);
        }

        // Clean files, read by FileSystemJobResultStore's own reader from a scratch folder.
        Map<JobID, JobResult> cleanResults = new HashMap<>();
        if (!cleanFiles.isEmpty()) {
            Path scratch = Files.createTempDirectory("flink-check-clean-");
            try {
                for (String name : cleanFiles) {
                    String id = stripSuffix(name, false);
                    Files.copy(dir.resolve(name), scratch.resolve(id + DIRTY), StandardCopyOption.REPLACE_EXISTING);
                }
                FileSystemJobResultStore reader =
                        FileSystemJobResultStore.fromConfiguration(jobConfig(scratch), DIRECT);
                for (JobResult r : reader.getDirtyResults()) {
                    cleanResults.put(r.getJobId(), r);
                }
            } finally {
                File[] left = scratch.toFile().listFiles();
                if (left != null) {
                    for (File f : left) {
                        f.delete();
                    }
                }
                Files.deleteIfExists(scratch);
            }
        }

        for (String hex : ids) {
            JobID id = JobID.fromHexString(hex);
            boolean hasDirty = store.hasDirtyJobResultEntryAsync(id).get();
            boolean hasClean = store.hasCleanJobResultEntryAsync(id).get();
            JobResult r = dirtyResults.containsKey(id) ? dirtyResults.get(id) : cleanResults.get(id);
            ObjectNode line = entryLine("job", "job-id", id.toHexString(), hasDirty, hasClean,
                    store.hasJobResultEntryAsync(id).get(), dirtyResults.containsKey(id));
            if (r == null) {
                line.putNull("job-status");
            } else {
                line.put("job-status", r.getJobStatus().map(Enum::name).orElse(null));
                line.put("net-runtime", r.getNetRuntime());
                line.put("name", r.getJobName());
                line.put("application-id", r.getApplicationId().map(ApplicationID::toHexString).orElse(null));
                line.put("start-time", r.getStartTime());
                line.put("end-time", r.getEndTime());
                line.put("success", r.isSuccess());
                line.put("failure-class",
                        r.getSerializedThrowable().map(t -> t.getOriginalErrorClassName()).orElse(null));
                line.put("accumulators", r.getAccumulatorResults().size());
            }
            System.out.println(JSON.writeValueAsString(line));
        }
        // A dirty result Flink returns without a file we listed would be a surprise: show it.
        for (JobID id : dirtyResults.keySet()) {
            printUnlisted("job", "job-id", id.toHexString(), ids);
        }
    }

    private static void readApplications(Path dir) throws Exception {
        Configuration config = new Configuration();
        config.set(ApplicationResultStoreOptions.STORAGE_PATH, dir.toUri().toString());
        config.set(ApplicationResultStoreOptions.DELETE_ON_COMMIT, false);
        FileSystemApplicationResultStore store = FileSystemApplicationResultStore.fromConfiguration(config, DIRECT);

        TreeSet<String> ids = new TreeSet<>();
        for (EntryFile e : applicationEntryFiles(dir)) {
            ids.add(e.id());
        }

        Map<ApplicationID, ApplicationResult> dirtyResults = new HashMap<>();
        Set<ApplicationResult> dirty = store.getDirtyResults();
        for (ApplicationResult r : dirty) {
            dirtyResults.put(r.getApplicationId(), r);
        }
        for (String hex : ids) {
            ApplicationID id = ApplicationID.fromHexString(hex);
            boolean hasDirty = store.hasDirtyApplicationResultEntryAsync(id).get();
            boolean hasClean = store.hasCleanApplicationResultEntryAsync(id).get();
            ApplicationResult r = dirtyResults.get(id);
            if (r == null && hasClean) {
                r = store.getCleanApplicationResultAsync(id).get();
            }
            ObjectNode line = entryLine("application", "application-id", id.toHexString(), hasDirty, hasClean,
                    store.hasApplicationResultEntryAsync(id).get(), dirtyResults.containsKey(id));
            if (r == null) {
                line.putNull("application-state");
            } else {
                line.put("application-state", r.getApplicationState() == null ? null : r.getApplicationState().name());
                line.put("application-name", r.getApplicationName());
                line.put("start-time", r.getStartTime());
                line.put("end-time", r.getEndTime());
            }
            System.out.println(JSON.writeValueAsString(line));
        }
        for (ApplicationID id : dirtyResults.keySet()) {
            printUnlisted("application", "application-id", id.toHexString(), ids);
        }
    }

    /** The fields every entry line starts with. */
    private static ObjectNode entryLine(String store, String idField, String id, boolean hasDirty,
            boolean hasClean, boolean hasEntry, boolean inDirtyResults) {
        ObjectNode line = JSON.createObjectNode();
        line.put("store", store);
        line.put(idField, id);
        line.put("has-dirty", hasDirty);
        line.put("has-clean", hasClean);
        line.put("has-entry", hasEntry);
        line.put("in-dirty-results", inDirtyResults);
        return line;
    }

    /** A dirty result Flink returned for an id without a listed entry file. */
    private static void printUnlisted(String store, String idField, String id, Set<String> listed)
            throws Exception {
        if (!listed.contains(id)) {
            ObjectNode line = JSON.createObjectNode();
            line.put("store", store);
            line.put(idField, id);
            line.put("unlisted-dirty-result", true);
            System.out.println(JSON.writeValueAsString(line));
        }
    }
}
