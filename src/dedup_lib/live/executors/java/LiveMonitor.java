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
 * answered at once with the rules' verdict (late too, when behind the watermark). The rest are
 * judged once a watermark reaches their time: every send of the key up to it, in replay order
 * (time, then event id, missing ones last), each against the key's anchor, the accepted send
 * whose window is open (docs/rules.md, sections 1 and 8). The anchor is let go when its window
 * closes by the watermark.
 *
 * <p>Which watermark: a send meets the one the files before its own left (Spark's, set by the
 * micro-batches before). Each staged file also carries the latest send time seen before it and
 * with it (the inbox's {@code seen} columns), from which the watermark this micro-batch leaves
 * is known already: the sends it reaches are judged in the micro-batch that reads them,
 * crossing the state store once; only the others wait in the key's state, for its timer or its
 * next send.
 *
 * <p>An event-time timer at {@code T} ms fires once the watermark {@code W >= T}: a send at
 * {@code t} µs is due once {@code t <= W * 1000}, so its timer is {@code ceil(t / 1000)}. Each
 * key holds one timer, the earliest that its pending sends or its anchor need (a timer
 * registered twice makes Spark log a warning). The key's anchor and the time of its timer are
 * one value of the state store, {@code held}: read once and written at most once each time
 * the key is handled.
 *
 * <p>Output: the send's columns with its verdict, then {@code original_micros}, {@code
 * original_event_id} (the duplicate's anchor), {@code missed_ms} (the watermark a late send
 * missed) and {@code original_content} (the anchor's content, for the collision alerts); then
 * what the state gained by the call that answered it: {@link #HELD_CHANGE} (anchors) and
 * {@link #WAITING_CHANGE} (sends waiting), carried by the call's first row, or by a row of its
 * own, {@link #TALLY} true and every other column null, when the call answered no send (a
 * timer that lets an anchor go, sends stored to wait). Their sums over the micro-batches are
 * the state's anchors and waiting sends, exactly: the state stores count no rows.
 */
public final class LiveMonitor {

    /** Anchors the state gained (negative: let go) by the call that answered the row. */
    public static final String HELD_CHANGE = "__dedup_held_change";
    /** Sends waiting in the state gained (negative: judged) by the same call. */
    public static final String WAITING_CHANGE = "__dedup_waiting_change";
    /** True for a row that only carries the two changes: no send. */
    public static final String TALLY = "__dedup_tally";

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
     * @param seenBefore latest send time (µs) of the files staged before this row's; may be
     *     absent from the input (a checkpoint staged without it): then Spark's watermark only
     * @param seenAfter the same, this row's file included
     * @param content the send's content compared for collisions; may be absent (no content)
     * @param latenessMs the watermark's delay behind the latest send time, milliseconds
     */
    public static Dataset<Row> apply(
            Dataset<Row> input, String k0, String k1, String micros, String window,
            String eventId, String decided, String verdict, String seenBefore, String seenAfter,
            String content, long latenessMs) {
        StructType in = input.schema();
        StructType keys = new StructType().add(in.apply(k0)).add(in.apply(k1));
        DataType idType = in.apply(eventId).dataType();
        int iContent = indexOr(in, content);
        DataType contentType = iContent < 0 ? DataTypes.StringType : in.fields()[iContent].dataType();
        StructType out = nullable(in).add("original_micros", DataTypes.LongType, true)
                .add("original_event_id", idType, true)
                .add("missed_ms", DataTypes.LongType, true)
                .add("original_content", contentType, true)
                .add(HELD_CHANGE, DataTypes.LongType, false)
                .add(WAITING_CHANGE, DataTypes.LongType, false)
                .add(TALLY, DataTypes.BooleanType, false);
        KeyValueGroupedDataset<Row, Row> grouped =
                input.groupBy(k0, k1).as(Encoders.row(keys), Encoders.row(in));
        Judge judge = new Judge(
                in, idType, in.fieldIndex(micros), in.fieldIndex(window),
                in.fieldIndex(eventId), in.fieldIndex(decided), in.fieldIndex(verdict),
                indexOr(in, seenBefore), indexOr(in, seenAfter), iContent, contentType,
                latenessMs);
        return grouped.transformWithState(
                judge, TimeMode.EventTime(), OutputMode.Append(), Encoders.row(out));
    }

    /** {@code schema} with every column nullable: a tally row holds no send. */
    static StructType nullable(StructType schema) {
        StructType all = new StructType();
        for (org.apache.spark.sql.types.StructField f : schema.fields()) {
            all = all.add(f.name(), f.dataType(), true, f.metadata());
        }
        return all;
    }

    /** The index of column {@code name} in {@code schema}, -1 when it has none. */
    static int indexOr(StructType schema, String name) {
        return java.util.Arrays.asList(schema.fieldNames()).indexOf(name);
    }

    /**
     * The watermark (ms) Spark sets after seeing sends up to {@code micros}: their latest time
     * in ms, truncated as Spark truncates it, less the delay.
     */
    static long watermarkAfter(long micros, long latenessMs) {
        return micros / 1000L - latenessMs;
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
        private final StructType kept;
        private final int iMicros;
        private final int iWindow;
        private final int iEvent;
        private final int iDecided;
        private final int iVerdict;
        private final int iBefore;
        private final int iAfter;
        private final int iContent;
        private final long latenessMs;
        private transient ListState<Row> pending;
        /**
         * The key's anchor (time, window's end, event id, content; null when none) and its
         * timer.
         */
        private transient ValueState<Row> held;

        Judge(StructType sends, DataType idType, int iMicros, int iWindow, int iEvent,
                int iDecided, int iVerdict, int iBefore, int iAfter, int iContent,
                DataType contentType, long latenessMs) {
            this.sends = sends;
            this.kept = new StructType()
                    .add("micros", DataTypes.LongType, true)
                    .add("closes", DataTypes.LongType, true)
                    .add("event_id", idType, true)
                    .add("timer", DataTypes.LongType, true)
                    .add("content", contentType, true);
            this.iContent = iContent;
            this.iMicros = iMicros;
            this.iWindow = iWindow;
            this.iEvent = iEvent;
            this.iDecided = iDecided;
            this.iVerdict = iVerdict;
            this.iBefore = iBefore;
            this.iAfter = iAfter;
            this.latenessMs = latenessMs;
        }

        @Override
        public void init(OutputMode outputMode, TimeMode timeMode) {
            pending = getHandle().getListState("pending", Encoders.row(sends), TTLConfig.NONE());
            held = getHandle().getValueState("held", Encoders.row(kept), TTLConfig.NONE());
        }

        @Override
        public scala.collection.Iterator<Row> handleInputRows(
                Row key, scala.collection.Iterator<Row> rows, TimerValues values) {
            long sparkMs = values.getCurrentWatermarkInMs();
            long lateMs = sparkMs;
            long dueMs = sparkMs;
            List<Row> in = new ArrayList<>();
            while (rows.hasNext()) {
                Row r = rows.next();
                lateMs = Math.max(lateMs, mark(r, iBefore));
                dueMs = Math.max(dueMs, mark(r, iAfter));
                in.add(r);
            }
            long late = lateMs * 1000L;
            long w = dueMs * 1000L;
            List<Row> out = new ArrayList<>();
            List<Row> due = new ArrayList<>();
            List<Row> waiting = new ArrayList<>();
            for (Row r : in) {
                boolean known = !r.isNullAt(iMicros);
                boolean decided = !r.isNullAt(iDecided) && r.getBoolean(iDecided);
                if (known && r.getLong(iMicros) <= late) {
                    out.add(answer(r, "late", null, lateMs));
                } else if (decided || !known) {
                    out.add(answer(r, r.isNullAt(iVerdict) ? null : r.getString(iVerdict),
                            null, null));
                } else {
                    (r.getLong(iMicros) <= w ? due : waiting).add(r);
                }
            }
            Row h = held.get();
            Row before = anchorOf(h);
            Long set = timerOf(h);
            if (due.isEmpty() && (set == null || set > dueMs)) {
                // Nothing of the key is due: the new sends wait, its timer at the earliest.
                long earliest = Long.MAX_VALUE;
                for (Row r : waiting) {
                    pending.appendValue(r);
                    earliest = Math.min(earliest, dueMs(r.getLong(iMicros)));
                }
                if (earliest != Long.MAX_VALUE) {
                    keep(h, before, schedule(set, earliest, sparkMs));
                }
                return tallied(out, 0, waiting.size());
            }
            boolean stored = set != null && set <= dueMs;
            List<Row> later = new ArrayList<>();
            int read = 0;
            if (stored) {
                scala.collection.Iterator<Row> waited = pending.get();
                while (waited.hasNext()) {
                    Row p = waited.next();
                    (p.getLong(iMicros) <= w ? due : later).add(p);
                    read++;
                }
            }
            Row a = settle(due, w, out, before);
            long next = a == null ? Long.MAX_VALUE : dueMs(a.getLong(1));
            if (stored) {
                pending.clear();
                later.addAll(waiting);
            } else if (set != null) {
                next = Math.min(next, set);  // the sends it waits for, unread, are all after w
            }
            List<Row> kept = stored ? later : waiting;
            for (Row p : kept) {
                pending.appendValue(p);
                next = Math.min(next, dueMs(p.getLong(iMicros)));
            }
            keep(h, a, reschedule(set, next, sparkMs));
            return tallied(out, anchors(a) - anchors(before), kept.size() - read);
        }

        /** 1 for an anchor, 0 for none (null). */
        private static int anchors(Row a) {
            return a == null ? 0 : 1;
        }

        /**
         * The call's rows {@code out}, the state's changes ({@code held} anchors, {@code
         * waiting} sends) carried by the first, or by a tally row when there is none.
         */
        private scala.collection.Iterator<Row> tallied(List<Row> out, long held, long waiting) {
            if (held != 0 || waiting != 0) {
                boolean tally = out.isEmpty();
                Object[] values = new Object[sends.length() + 7];
                int n = values.length - 3;
                for (int i = 0; !tally && i < n; i++) {
                    values[i] = out.get(0).get(i);
                }
                values[n] = held;
                values[n + 1] = waiting;
                values[n + 2] = tally;
                Row carrier = RowFactory.create(values);
                if (tally) {
                    out.add(carrier);
                } else {
                    out.set(0, carrier);
                }
            }
            return CollectionConverters.asScala(out.iterator());
        }

        /** The watermark (ms) a row's {@code seen} column at {@code index} stands for. */
        private long mark(Row r, int index) {
            if (index < 0 || r.isNullAt(index)) {
                return Long.MIN_VALUE;
            }
            return watermarkAfter(r.getLong(index), latenessMs);
        }

        /**
         * The {@code due} sends judged against the key's anchor {@code before}: the anchor
         * after them (the same row when none was accepted), null once its window closes by
         * {@code w} µs.
         */
        private Row settle(List<Row> due, long w, List<Row> out, Row before) {
            Row a = due.isEmpty() ? before : walk(due, before, out);
            return a != null && a.getLong(1) <= w ? null : a;
        }

        /**
         * The key's one timer moved from {@code set} (null: none) to {@code next} ms
         * ({@code Long.MAX_VALUE}: none): the timer it holds after (null: none). A timer at or
         * behind Spark's watermark {@code sparkMs} fires after this input whatever is done, so
         * it is left to fire.
         */
        private Long reschedule(Long set, long next, long sparkMs) {
            if (set != null && set == next) {
                return set;
            }
            if (set != null && set > sparkMs) {
                getHandle().deleteTimer(set);
            }
            if (next == Long.MAX_VALUE) {
                return null;
            }
            getHandle().registerTimer(next);
            return next;
        }

        /**
         * The key's anchor {@code a} and timer {@code t} written as one value, where they
         * differ from what {@code h} held (its anchor is {@code h} itself when the walk
         * accepted none); the value removed when the key holds neither.
         */
        private void keep(Row h, Row a, Long t) {
            if (a == anchorOf(h) && java.util.Objects.equals(timerOf(h), t)) {
                return;
            }
            if (a == null && t == null) {
                if (h != null) {
                    held.clear();
                }
                return;
            }
            held.update(a == null
                    ? RowFactory.create(null, null, null, t, null)
                    : RowFactory.create(a.get(0), a.get(1), a.get(2), t, a.get(4)));
        }

        /**
         * The anchor {@code h} holds, null when none: {@code h} itself, whose fields are an
         * anchor's (time, window's end, event id, and at 4 its content), so the walk reads it
         * without a copy.
         */
        private static Row anchorOf(Row h) {
            return h == null || h.isNullAt(0) ? null : h;
        }

        /** The time of the timer {@code h} holds, null when none. */
        private static Long timerOf(Row h) {
            return h == null || h.isNullAt(3) ? null : h.getLong(3);
        }

        @Override
        public scala.collection.Iterator<Row> handleExpiredTimer(
                Row key, TimerValues values, ExpiredTimerInfo info) {
            long wMs = values.getCurrentWatermarkInMs();
            long w = wMs * 1000L;
            List<Row> due = new ArrayList<>();
            List<Row> rest = new ArrayList<>();
            scala.collection.Iterator<Row> waited = pending.get();
            while (waited.hasNext()) {
                Row p = waited.next();
                (p.getLong(iMicros) <= w ? due : rest).add(p);
            }
            Row h = held.get();
            Row before = anchorOf(h);
            List<Row> out = new ArrayList<>(due.size() + 1);
            Row a = settle(due, w, out, before);
            long next = a == null ? Long.MAX_VALUE : dueMs(a.getLong(1));
            if (!due.isEmpty()) {
                pending.clear();
                for (Row p : rest) {
                    pending.appendValue(p);
                }
            }
            for (Row p : rest) {
                next = Math.min(next, dueMs(p.getLong(iMicros)));
            }
            keep(h, a, schedule(timerOf(h), next, wMs));
            return tallied(out, anchors(a) - anchors(before), -due.size());
        }

        /** The due sends walked in replay order against the anchor; the anchor after them. */
        private Row walk(List<Row> due, Row a, List<Row> out) {
            due.sort(Comparator.<Row>comparingLong(p -> p.getLong(iMicros))
                    .thenComparing((p, q) -> compareIds(p.get(iEvent), q.get(iEvent))));
            for (Row p : due) {
                long t = p.getLong(iMicros);
                if (a != null && Anchor.catches(a.getLong(0), a.getLong(1), t)) {
                    out.add(answer(p, "duplicate", a, null));
                } else {
                    out.add(answer(p, "accepted", null, null));
                    Object content = iContent < 0 ? null : p.get(iContent);
                    a = RowFactory.create(
                            t, Anchor.closes(t, p.getLong(iWindow)), p.get(iEvent), null, content);
                }
            }
            return a;
        }

        /**
         * The key's one timer, now {@code set} (null: none), at {@code due} ms ({@code
         * Long.MAX_VALUE}: none), unless one not yet fired (after the watermark {@code wMs}) is
         * set at or before it: the timer it holds after.
         */
        private Long schedule(Long set, long due, long wMs) {
            if (set == null || set <= wMs || set > due) {
                return reschedule(set, due, wMs);
            }
            return set;
        }

        /**
         * The send's answer: its columns with {@code verdict}, then the time, event id and
         * content of {@code original} (the anchor a duplicate met; null for none) and the
         * watermark {@code missedMs} a late send missed.
         */
        private Row answer(Row send, String verdict, Row original, Long missedMs) {
            int n = send.length();
            Object[] values = new Object[n + 7];
            for (int i = 0; i < n; i++) {
                values[i] = send.get(i);
            }
            values[iVerdict] = verdict;
            if (original != null) {
                values[n] = original.getLong(0);
                values[n + 1] = original.get(2);
                values[n + 3] = original.get(4);
            }
            values[n + 2] = missedMs;
            values[n + 4] = 0L;
            values[n + 5] = 0L;
            values[n + 6] = false;
            return RowFactory.create(values);
        }
    }
}
