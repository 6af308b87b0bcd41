package dedup_lib;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
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
 * <p>Grouped by the two hashes of (entity, content). A key's rows are taken micro-batch by
 * micro-batch, each micro-batch's in replay order (time, then event id): each send is paired
 * with the copy before it, the one before it in its micro-batch, or for the first, the copy
 * kept from the micro-batches before (when not after it); a pair within the horizon is a
 * resend. The key keeps its latest copy (time, event id, MessageId) and a timer at the
 * horizon's end, which lets it go: every send accepted after that is beyond the horizon of it
 * (the stream's watermark trails the live monitor's, which every accepted send is after).
 *
 * <p>Output: the resends, each with {@code original_micros}, {@code original_event_id} and
 * {@code original_message_id}, of the copy before it.
 */
public final class ResendMonitor {

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
        StructType keys = new StructType().add(in.apply(c0)).add(in.apply(c1));
        DataType idType = in.apply(eventId).dataType();
        StructType out = in.add("original_micros", DataTypes.LongType, true)
                .add("original_event_id", idType, true)
                .add("original_message_id", DataTypes.StringType, true);
        KeyValueGroupedDataset<Row, Row> grouped =
                input.groupBy(c0, c1).as(Encoders.row(keys), Encoders.row(in));
        Pairer pairer = new Pairer(
                idType, in.fieldIndex(micros), in.fieldIndex(eventId), in.fieldIndex(messageId),
                in.fieldIndex(batch), horizonMicros);
        return grouped.transformWithState(
                pairer, TimeMode.EventTime(), OutputMode.Append(), Encoders.row(out));
    }

    static final class Pairer extends StatefulProcessor<Row, Row, Row> {
        private static final long serialVersionUID = 1L;
        private final StructType kept;
        private final int iMicros;
        private final int iEvent;
        private final int iMessage;
        private final int iBatch;
        private final long horizon;
        /** The key's latest copy (time, event id, MessageId) and its timer. */
        private transient ValueState<Row> copy;

        Pairer(DataType idType, int iMicros, int iEvent, int iMessage, int iBatch,
                long horizon) {
            this.kept = new StructType()
                    .add("micros", DataTypes.LongType, false)
                    .add("event_id", idType, true)
                    .add("message_id", DataTypes.StringType, true)
                    .add("timer", DataTypes.LongType, false);
            this.iMicros = iMicros;
            this.iEvent = iEvent;
            this.iMessage = iMessage;
            this.iBatch = iBatch;
            this.horizon = horizon;
        }

        @Override
        public void init(OutputMode outputMode, TimeMode timeMode) {
            copy = getHandle().getValueState("copy", Encoders.row(kept), TTLConfig.NONE());
        }

        @Override
        public scala.collection.Iterator<Row> handleInputRows(
                Row key, scala.collection.Iterator<Row> rows, TimerValues values) {
            List<Row> in = new ArrayList<>();
            while (rows.hasNext()) {
                in.add(rows.next());
            }
            in.sort(Comparator.<Row>comparingLong(r -> r.getLong(iBatch))
                    .thenComparingLong(r -> r.getLong(iMicros))
                    .thenComparing((p, q) -> LiveMonitor.compareIds(p.get(iEvent), q.get(iEvent))));
            Row was = copy.get();
            Row k = was;
            List<Row> out = new ArrayList<>();
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
            k = latest(k, before);
            if (k != was) {
                long timer = LiveMonitor.dueMs(k.getLong(0) + horizon);
                Long set = was == null ? null : was.getLong(3);
                if (set == null || set != timer) {
                    if (set != null && set > values.getCurrentWatermarkInMs()) {
                        getHandle().deleteTimer(set);
                    }
                    getHandle().registerTimer(timer);
                }
                copy.update(RowFactory.create(k.getLong(0), k.get(1), k.get(2), timer));
            }
            return CollectionConverters.asScala(out.iterator());
        }

        /**
         * The copy kept after a micro-batch whose last send is {@code last} (null: none),
         * {@code k} kept before it: the later in time, the micro-batch's on a tie.
         */
        private Row latest(Row k, Row last) {
            if (last == null || (k != null && k.getLong(0) > last.getLong(iMicros))) {
                return k;
            }
            return RowFactory.create(last.getLong(iMicros), last.get(iEvent), last.get(iMessage),
                    0L);
        }

        @Override
        public scala.collection.Iterator<Row> handleExpiredTimer(
                Row key, TimerValues values, ExpiredTimerInfo info) {
            Row k = copy.get();
            if (k != null && k.getLong(3) == info.getExpiryTimeInMs()) {
                copy.clear();
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
