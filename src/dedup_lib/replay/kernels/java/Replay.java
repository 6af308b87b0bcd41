package dedup_lib;

import java.time.Instant;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF7;

/**
 * The replay kernel on the JVM: the twin of {@code find_originals} in dedup_lib/replay/kernels/python.py.
 *
 * <p>Called once per send, in the order of a partition sorted by (key, time, event id), it
 * answers the original (its time and event id) when the send is a duplicate, else null. Its
 * state is the anchor of the current key: the accepted send whose window is open (docs/rules.md,
 * section 1). The last argument, {@code monotonically_increasing_id()} of the same projection, counts
 * the rows of the stream the call belongs to: where it does not follow the previous call's,
 * a new stream began (another partition, or another plan's rows in the same task, as in a
 * cross join of two results that share this object), and the anchor is dropped. It also makes
 * the call nondeterministic, so that Spark neither moves it below the sort nor evaluates it
 * twice per row.
 */
public final class Replay
        implements UDF7<Long, Long, Long, Object, Boolean, Long, Long, Row> {
    private static final long serialVersionUID = 1L;

    private boolean open;
    private long nextRow = Long.MIN_VALUE;
    private long key1;
    private long key2;
    private long anchorMicros;
    private Object anchorEventId;

    /**
     * @param key1 first hash of (entity, key)
     * @param key2 second, independent hash of (entity, key)
     * @param micros send time, microseconds since the epoch (UTC)
     * @param eventId the send's event id, of any type; returned as the original's
     * @param decided true for sends decided before the pass (rejected, no MessageId)
     * @param window the window in microseconds
     * @param row the row's monotonically increasing id in its stream
     */
    @Override
    public Row call(
            Long key1, Long key2, Long micros, Object eventId, Boolean decided, Long window,
            Long row) {
        boolean follows = row != null && row == nextRow;
        nextRow = row == null ? Long.MIN_VALUE : row + 1;
        if (decided == null || decided || micros == null || key1 == null || key2 == null) {
            open = false;
            return null;
        }
        long t = micros;
        if (open
                && follows
                && key1 == this.key1
                && key2 == this.key2
                && Anchor.catches(
                        anchorMicros, Anchor.closes(anchorMicros, window == null ? 0L : window), t)) {
            return RowFactory.create(
                    Instant.ofEpochSecond(
                            Math.floorDiv(anchorMicros, 1_000_000L),
                            Math.floorMod(anchorMicros, 1_000_000L) * 1_000L),
                    anchorEventId);
        }
        open = true;
        this.key1 = key1;
        this.key2 = key2;
        anchorMicros = t;
        anchorEventId = eventId;
        return null;
    }
}
