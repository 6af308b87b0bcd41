package dedup_lib;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

import scala.jdk.javaapi.CollectionConverters;

/**
 * The resends on the executors: the twin of {@code Resends} in dedup_lib/live/state/resends.py,
 * as a {@code transformWithState} processor over the accepted sends with content, each row
 * tagged with the live monitor's micro-batch that accepted it.
 *
 * <p>Keyed by the two hashes of (entity, content), held in {@link #BUCKETS} buckets of the first
 * hash: Spark groups by bucket, and each bucket keeps its keys' copies in a map. A key's rows
 * are taken micro-batch by micro-batch, each micro-batch's in replay order (time, then event
 * id): each send is paired with the copy before it, the one before it in its micro-batch, or
 * for the first, the copy kept from the micro-batches before (when not after it); a pair
 * within the horizon is a resend. The key keeps its latest copy (time, event id, MessageId).
 *
 * <p>A copy is let go once the horizon after it has passed by the watermark: every send
 * accepted after that is beyond the horizon of it (the stream's watermark trails the live
 * monitor's, which every accepted send is after), so a copy kept longer pairs with nothing.
 * One event-time timer per bucket, not per key, sweeps the bucket's map: it lets go every copy
 * whose horizon has passed, and is set again at the earliest horizon's end left, but not
 * before {@link #SWEEP_PARTS} of the horizon has passed since (a copy is kept at most that much
 * longer). A timer per key cost each copy a timer registered in Spark's timer index and fired
 * (five reads and writes of the state store more than the copy's own); a bucket's sweep reads
 * its copies once each in turn.
 *
 * <p>Output: the resends, each with {@code original_micros}, {@code original_event_id} and
 * {@code original_message_id}, of the copy before it.
 */
public final class ResendMonitor {

    /** The buckets the keys are held in: each a group of Spark's, a map and one timer. */
    public static final int BUCKETS = 1024;
    /** A sweep comes at most once per this fraction of the horizon, in a bucket. */
    static final long SWEEP_PARTS = 4;
    /** The column of the bucket Spark groups by. */
    static final String BUCKET = "__dedup_resend_bucket";

    private ResendMonitor() {}

    /**
     * The resends among the accepted sends.
     *
     * @param input the accepted sends with content, streaming, their watermark set and its
     *     column dropped
     * @param c0 first hash of (entity, content)
     * @param c1 second hash of (entity, content)
     * @param micros send time, microseconds since the epoch (UTC)
     * @param eventId the send's event id
     * @param messageId the send's MessageId
     * @param batch the live monitor's micro-batch that accepted the send
     * @param horizonMicros how far back a copy makes a send a resend, microseconds
     */
    public static Dataset<Row> apply(
            Dataset<Row> input, String c0, String c1, String micros, String eventId,
            String messageId, String batch, long horizonMicros) {
        StructType in = input.schema();
        StructType keys = new StructType().add(BUCKET, DataTypes.LongType, false);
        StructType pair = new StructType().add(in.apply(c0)).add(in.apply(c1));
        DataType idType = in.apply(eventId).dataType();
        StructType out = in.add("original_micros", DataTypes.LongType, true)
                .add("original_event_id", idType, true)
                .add("original_message_id", DataTypes.StringType, true);
        Column bucket = functions.pmod(input.col(c0), functions.lit((long) BUCKETS));
        KeyValueGroupedDataset<Row, Row> grouped =
                input.groupBy(bucket.as(BUCKET)).as(Encoders.row(keys), Encoders.row(in));
        Pairer pairer = new Pairer(
                pair, idType, in.fieldIndex(c0), in.fieldIndex(c1), in.fieldIndex(micros),
                in.fieldIndex(eventId), in.fieldIndex(messageId), in.fieldIndex(batch),
                horizonMicros);
        return grouped.transformWithState(
                pairer, TimeMode.EventTime(), OutputMode.Append(), Encoders.row(out));
    }

    static final class Pairer extends StatefulProcessor<Row, Row, Row> {
        private static final long serialVersionUID = 1L;
        private final StructType pair;
        private final StructType kept;
        private final int iC0;
        private final int iC1;
        private final int iMicros;
        private final int iEvent;
        private final int iMessage;
        private final int iBatch;
        private final long horizon;
        /** Each key's latest copy (time, event id, MessageId), by the key's two hashes. */
        private transient MapState<Row, Row> copies;
        /** The time of the bucket's sweep timer, none when it holds no copy. */
        private transient ValueState<Long> sweep;

        Pairer(StructType pair, DataType idType, int iC0, int iC1, int iMicros, int iEvent,
                int iMessage, int iBatch, long horizon) {
            this.pair = pair;
            this.kept = new StructType()
                    .add("micros", DataTypes.LongType, false)
                    .add("event_id", idType, true)
                    .add("message_id", DataTypes.StringType, true);
            this.iC0 = iC0;
            this.iC1 = iC1;
            this.iMicros = iMicros;
            this.iEvent = iEvent;
            this.iMessage = iMessage;
            this.iBatch = iBatch;
            this.horizon = horizon;
        }

        @Override
        public void init(OutputMode outputMode, TimeMode timeMode) {
            copies = getHandle().getMapState(
                    "copies", Encoders.row(pair), Encoders.row(kept), TTLConfig.NONE());
            sweep = getHandle().getValueState("sweep", Encoders.LONG(), TTLConfig.NONE());
        }

        @Override
        public scala.collection.Iterator<Row> handleInputRows(
                Row bucket, scala.collection.Iterator<Row> rows, TimerValues values) {
            List<Row> in = new ArrayList<>();
            while (rows.hasNext()) {
                in.add(rows.next());
            }
            in.sort(Comparator.<Row>comparingLong(r -> r.getLong(iC0))
                    .thenComparingLong(r -> r.getLong(iC1))
                    .thenComparingLong(r -> r.getLong(iBatch))
                    .thenComparingLong(r -> r.getLong(iMicros))
                    .thenComparing((p, q) -> LiveMonitor.compareIds(p.get(iEvent), q.get(iEvent))));
            List<Row> out = new ArrayList<>();
            long earliest = Long.MAX_VALUE;
            int from = 0;
            for (int i = 1; i <= in.size(); i++) {
                if (i < in.size() && sameKey(in.get(i), in.get(from))) {
                    continue;
                }
                Row key = RowFactory.create(in.get(from).getLong(iC0), in.get(from).getLong(iC1));
                Row was = copies.getValue(key);
                Row k = pairKey(in.subList(from, i), was, out);
                if (k != was) {
                    copies.updateValue(key, k);
                    earliest = Math.min(earliest, k.getLong(0));
                }
                from = i;
            }
            if (earliest != Long.MAX_VALUE && !sweep.exists()) {
                long timer = LiveMonitor.dueMs(earliest + horizon);
                getHandle().registerTimer(timer);
                sweep.update(timer);
            }
            return CollectionConverters.asScala(out.iterator());
        }

        /** Whether two rows hold the same key (both hashes). */
        private boolean sameKey(Row a, Row b) {
            return a.getLong(iC0) == b.getLong(iC0) && a.getLong(iC1) == b.getLong(iC1);
        }

        /**
         * One key's rows {@code in}, in order, paired against the copy {@code was} kept (null:
         * none): its resends added to {@code out}; the copy kept after them.
         */
        private Row pairKey(List<Row> in, Row was, List<Row> out) {
            Row k = was;
            Row before = null;
            for (Row r : in) {
                long t = r.getLong(iMicros);
                if (before == null || before.getLong(iBatch) != r.getLong(iBatch)) {
                    k = latest(k, before);
                    if (k != null && k.getLong(0) <= t && t - k.getLong(0) <= horizon) {
                        out.add(resend(r, k.getLong(0), k.get(1), k.get(2)));
                    }
                } else if (t - before.getLong(iMicros) <= horizon) {
                    out.add(resend(r, before.getLong(iMicros), before.get(iEvent),
                            before.get(iMessage)));
                }
                before = r;
            }
            return latest(k, before);
        }

        /**
         * The copy kept after a micro-batch whose last send is {@code last} (null: none),
         * {@code k} kept before it: the later in time, the micro-batch's on a tie.
         */
        private Row latest(Row k, Row last) {
            if (last == null || (k != null && k.getLong(0) > last.getLong(iMicros))) {
                return k;
            }
            return RowFactory.create(last.getLong(iMicros), last.get(iEvent), last.get(iMessage));
        }

        @Override
        public scala.collection.Iterator<Row> handleExpiredTimer(
                Row bucket, TimerValues values, ExpiredTimerInfo info) {
            long wMs = values.getCurrentWatermarkInMs();
            List<Row> gone = new ArrayList<>();
            long next = Long.MAX_VALUE;
            scala.collection.Iterator<scala.Tuple2<Row, Row>> held = copies.iterator();
            while (held.hasNext()) {
                scala.Tuple2<Row, Row> e = held.next();
                long due = LiveMonitor.dueMs(e._2().getLong(0) + horizon);
                if (due <= wMs) {
                    gone.add(e._1());
                } else {
                    next = Math.min(next, due);
                }
            }
            for (Row key : gone) {
                copies.removeKey(key);
            }
            if (next == Long.MAX_VALUE) {
                sweep.clear();
            } else {
                long timer = Math.max(next, wMs + Math.max(1L, horizon / 1000L / SWEEP_PARTS));
                getHandle().registerTimer(timer);
                sweep.update(timer);
            }
            return CollectionConverters.asScala(new ArrayList<Row>().iterator());
        }

        /** The send's row with the time, event id and MessageId of the copy before it. */
        private static Row resend(Row send, long micros, Object eventId, Object messageId) {
            int n = send.length();
            Object[] values = new Object[n + 3];
            for (int i = 0; i < n; i++) {
                values[i] = send.get(i);
            }
            values[n] = micros;
            values[n + 1] = eventId;
            values[n + 2] = messageId;
            return RowFactory.create(values);
        }
    }
}
