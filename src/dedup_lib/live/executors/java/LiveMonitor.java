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
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.jdk.javaapi.CollectionConverters;

/**
 * The live monitor's judge on the executors: the twin of {@code judge} in
 * dedup_lib/live/state/judge.py, as a {@code transformWithState} processor over the keyed sends.
 *
 * <p>Grouped by the key's two hashes, in event time. A send behind the watermark it meets is
 * answered {@code late} at once, with that watermark; a send decided by the rules alone is
 * answered at once with the rules' verdict (late too, when behind the watermark); the rest wait
 * in the key's state. A timer judges them once the watermark reaches their time: every send of
 * the key up to the watermark, in replay order (time, then event id, missing ones last), each
 * against the key's anchor, the accepted send whose window is open (docs/rules.md, sections 1
 * and 8). The anchor is let go when its window closes by the watermark.
 *
 * <p>An event-time timer at {@code T} ms fires once the watermark {@code W >= T}: a send at
 * {@code t} µs is due once {@code t <= W * 1000}, so its timer is {@code ceil(t / 1000)}. Each
 * key holds one timer, the earliest that its pending sends or its anchor need (a timer
 * registered twice makes Spark log a warning).
 *
 * <p>Output: the send's columns with its verdict, then {@code original_micros}, {@code
 * original_event_id} (the duplicate's anchor) and {@code missed_ms} (the watermark a late send
 * missed).
 */
public final class LiveMonitor {

    private LiveMonitor() {}

    /**
     * The sends judged.
     *
     * @param input the keyed sends, streaming, their watermark set and its column dropped
     * @param k0 first hash of (entity, key); null for decided sends
     * @param k1 second hash of (entity, key)
     * @param micros send time, microseconds since the epoch (UTC)
     * @param window the window of the send's entity, microseconds
     * @param eventId the send's event id
     * @param decided true for sends the rules decided before any walk
     * @param verdict the rules' verdict, replaced by the judge's
     */
    public static Dataset<Row> apply(
            Dataset<Row> input, String k0, String k1, String micros, String window,
            String eventId, String decided, String verdict) {
        StructType in = input.schema();
        StructType keys = new StructType().add(in.apply(k0)).add(in.apply(k1));
        DataType idType = in.apply(eventId).dataType();
        StructType out = in.add("original_micros", DataTypes.LongType, true)
                .add("original_event_id", idType, true)
                .add("missed_ms", DataTypes.LongType, true);
        KeyValueGroupedDataset<Row, Row> grouped =
                input.groupBy(k0, k1).as(Encoders.row(keys), Encoders.row(in));
        Judge judge = new Judge(
                in, idType, in.fieldIndex(micros), in.fieldIndex(window),
                in.fieldIndex(eventId), in.fieldIndex(decided), in.fieldIndex(verdict));
        return grouped.transformWithState(
                judge, TimeMode.EventTime(), OutputMode.Append(), Encoders.row(out));
    }

    /** The timer at which a send at {@code micros} is due: the watermark's ms it needs. */
    static long dueMs(long micros) {
        return Math.floorDiv(micros, 1000L) + (Math.floorMod(micros, 1000L) == 0 ? 0L : 1L);
    }

    /** Event ids as Spark orders them: texts by their UTF-8 bytes, missing ones last. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static int compareIds(Object a, Object b) {
        if (a == null) {
            return b == null ? 0 : 1;
        }
        if (b == null) {
            return -1;
        }
        if (a instanceof String && b instanceof String) {
            return UTF8String.fromString((String) a).compareTo(UTF8String.fromString((String) b));
        }
        if (a instanceof Comparable && a.getClass() == b.getClass()) {
            return ((Comparable) a).compareTo(b);
        }
        return 0;
    }

    static final class Judge extends StatefulProcessor<Row, Row, Row> {
        private static final long serialVersionUID = 1L;
        private final StructType sends;
        private final StructType anchors;
        private final int iMicros;
        private final int iWindow;
        private final int iEvent;
        private final int iDecided;
        private final int iVerdict;
        private transient ListState<Row> pending;
        private transient ValueState<Row> anchor;
        private transient ValueState<Long> timer;

        Judge(StructType sends, DataType idType, int iMicros, int iWindow, int iEvent,
                int iDecided, int iVerdict) {
            this.sends = sends;
            this.anchors = new StructType()
                    .add("micros", DataTypes.LongType, false)
                    .add("closes", DataTypes.LongType, false)
                    .add("event_id", idType, true);
            this.iMicros = iMicros;
            this.iWindow = iWindow;
            this.iEvent = iEvent;
            this.iDecided = iDecided;
            this.iVerdict = iVerdict;
        }

        @Override
        public void init(OutputMode outputMode, TimeMode timeMode) {
            pending = getHandle().getListState("pending", Encoders.row(sends), TTLConfig.NONE());
            anchor = getHandle().getValueState("anchor", Encoders.row(anchors), TTLConfig.NONE());
            timer = getHandle().getValueState("timer", Encoders.LONG(), TTLConfig.NONE());
        }

        @Override
        public scala.collection.Iterator<Row> handleInputRows(
                Row key, scala.collection.Iterator<Row> rows, TimerValues values) {
            long wMs = values.getCurrentWatermarkInMs();
            long w = wMs * 1000L;
            List<Row> out = new ArrayList<>();
            long earliest = Long.MAX_VALUE;
            while (rows.hasNext()) {
                Row r = rows.next();
                boolean known = !r.isNullAt(iMicros);
                boolean decided = !r.isNullAt(iDecided) && r.getBoolean(iDecided);
                if (known && r.getLong(iMicros) <= w) {
                    out.add(answer(r, "late", null, null, wMs));
                } else if (decided || !known) {
                    out.add(answer(r, r.isNullAt(iVerdict) ? null : r.getString(iVerdict),
                            null, null, null));
                } else {
                    pending.appendValue(r);
                    earliest = Math.min(earliest, dueMs(r.getLong(iMicros)));
                }
            }
            if (earliest != Long.MAX_VALUE) {
                schedule(earliest, wMs);
            }
            return CollectionConverters.asScala(out.iterator());
        }

        @Override
        public scala.collection.Iterator<Row> handleExpiredTimer(
                Row key, TimerValues values, ExpiredTimerInfo info) {
            long wMs = values.getCurrentWatermarkInMs();
            long w = wMs * 1000L;
            List<Row> due = new ArrayList<>();
            List<Row> rest = new ArrayList<>();
            scala.collection.Iterator<Row> held = pending.get();
            while (held.hasNext()) {
                Row p = held.next();
                (p.getLong(iMicros) <= w ? due : rest).add(p);
            }
            List<Row> out = new ArrayList<>(due.size());
            Row before = anchor.get();
            Row a = before;
            if (!due.isEmpty()) {
                a = walk(due, a, out);
                pending.clear();
                for (Row p : rest) {
                    pending.appendValue(p);
                }
            }
            if (a != null && a.getLong(1) <= w) {
                a = null;
            }
            if (a == null && before != null) {
                anchor.clear();
            } else if (a != before) {
                anchor.update(a);
            }
            long next = a == null ? Long.MAX_VALUE : dueMs(a.getLong(1));
            for (Row p : rest) {
                next = Math.min(next, dueMs(p.getLong(iMicros)));
            }
            schedule(next, wMs);
            return CollectionConverters.asScala(out.iterator());
        }

        /** The due sends walked in replay order against the anchor; the anchor after them. */
        private Row walk(List<Row> due, Row a, List<Row> out) {
            due.sort(Comparator.<Row>comparingLong(p -> p.getLong(iMicros))
                    .thenComparing((p, q) -> compareIds(p.get(iEvent), q.get(iEvent))));
            for (Row p : due) {
                long t = p.getLong(iMicros);
                if (a != null && Anchor.catches(a.getLong(0), a.getLong(1), t)) {
                    out.add(answer(p, "duplicate", a.getLong(0), a.get(2), null));
                } else {
                    out.add(answer(p, "accepted", null, null, null));
                    a = RowFactory.create(t, Anchor.closes(t, p.getLong(iWindow)), p.get(iEvent));
                }
            }
            return a;
        }

        /**
         * The key's one timer at {@code due} ms ({@code Long.MAX_VALUE}: none), unless one not
         * yet fired (after the watermark {@code wMs}) is set at or before it.
         */
        private void schedule(long due, long wMs) {
            Long set = timer.get();
            boolean live = set != null && set > wMs;
            if (live && set <= due) {
                return;
            }
            if (live) {
                getHandle().deleteTimer(set);
            }
            if (due == Long.MAX_VALUE) {
                if (set != null) {
                    timer.clear();
                }
                return;
            }
            getHandle().registerTimer(due);
            timer.update(due);
        }

        private Row answer(Row send, String verdict, Long originalMicros, Object originalId,
                Long missedMs) {
            int n = send.length();
            Object[] values = new Object[n + 3];
            for (int i = 0; i < n; i++) {
                values[i] = send.get(i);
            }
            values[iVerdict] = verdict;
            values[n] = originalMicros;
            values[n + 1] = originalId;
            values[n + 2] = missedMs;
            return RowFactory.create(values);
        }
    }
}
