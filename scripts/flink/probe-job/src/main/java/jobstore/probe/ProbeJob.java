package jobstore.probe;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * Test job for the jobstore integration tests.
 *
 * <p>Args: {@code <records (0 = unbounded)> <records per second (0 = no limit)> <job name>
 * [snapshot sleep ms] [fail after N records (-1 = never)] [checkpoint interval ms]}
 *
 * <p>A rate-limited {@link DataGeneratorSource} feeds a stateful map (operator state: the number
 * of records seen) into a {@link DiscardingSink}. {@code snapshotState} sleeps the given time, so a
 * savepoint stays IN_PROGRESS observably long. With a fifth argument the map throws after that
 * many records and, as the restart strategy is "none", the job ends FAILED. A bounded job (records
 * &gt; 0) ends FINISHED once all records are emitted. With a sixth argument &gt; 0 the job takes a
 * checkpoint at that interval and restarts after a failure (fixed delay, 1 s, up to 100 times)
 * instead of failing: that is the unbounded checkpointed job of the HA failover tests. Operator uids are stable ("probe-source",
 * "probe-map", "probe-sink") so a savepoint can be restored into a new run of the job.
 */
public final class ProbeJob {

    private ProbeJob() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3 || args.length > 6) {
            throw new IllegalArgumentException(
                    "usage: ProbeJob <records (0 = unbounded)> <records per second (0 = no limit)>"
                            + " <job name> [snapshot sleep ms] [fail after N records (-1 = never)]"
                            + " [checkpoint interval ms]");
        }
        long records = Long.parseLong(args[0]);
        double perSecond = Double.parseDouble(args[1]);
        String name = args[2];
        long snapshotSleepMs = args.length > 3 ? Long.parseLong(args[3]) : 0L;
        long failAfter = args.length > 4 ? Long.parseLong(args[4]) : -1L;
        long checkpointMs = args.length > 5 ? Long.parseLong(args[5]) : 0L;
        if (records < 0 || perSecond < 0 || snapshotSleepMs < 0 || failAfter < -1 || checkpointMs < 0) {
            throw new IllegalArgumentException("negative argument");
        }

        Configuration conf = new Configuration();
        if (checkpointMs > 0) {
            conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
            conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 100);
            conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, java.time.Duration.ofSeconds(1));
        } else {
            conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.configure(conf);
        env.setParallelism(1);
        if (checkpointMs > 0) {
            env.enableCheckpointing(checkpointMs);
        }

        long count = records == 0 ? Long.MAX_VALUE : records;
        RateLimiterStrategy rateLimit =
                perSecond > 0 ? RateLimiterStrategy.perSecond(perSecond) : RateLimiterStrategy.noOp();
        GeneratorFunction<Long, Long> identity = index -> index;
        DataGeneratorSource<Long> source =
                new DataGeneratorSource<>(identity, count, rateLimit, Types.LONG);

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "probe-source")
                .uid("probe-source")
                .map(new SlowSnapshotMap(snapshotSleepMs, failAfter))
                .uid("probe-map")
                .name("probe-map")
                .sinkTo(new DiscardingSink<>())
                .uid("probe-sink")
                .name("probe-sink");

        env.execute(name);
    }

    /** Counts records in operator state; sleeps in snapshotState; optionally fails. */
    public static final class SlowSnapshotMap extends RichMapFunction<Long, Long>
            implements CheckpointedFunction {
        private static final long serialVersionUID = 1L;

        private final long snapshotSleepMs;
        private final long failAfter;
        private transient ListState<Long> countState;
        private long seen;

        public SlowSnapshotMap(long snapshotSleepMs, long failAfter) {
            this.snapshotSleepMs = snapshotSleepMs;
            this.failAfter = failAfter;
        }

        @Override
        public Long map(Long value) {
            seen++;
            if (failAfter >= 0 && seen > failAfter) {
                throw new IllegalStateException(
                        "ProbeJob: intentional failure after " + failAfter + " records");
            }
            return value;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            if (snapshotSleepMs > 0) {
                Thread.sleep(snapshotSleepMs);
            }
            countState.update(java.util.Collections.singletonList(seen));
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            countState =
                    context.getOperatorStateStore()
                            .getListState(new ListStateDescriptor<>("probe-count", Types.LONG));
            seen = 0;
            for (Long c : countState.get()) {
                seen += c;
            }
        }
    }
}
