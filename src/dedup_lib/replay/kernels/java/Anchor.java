package dedup_lib;

/**
 * The broker's anchor rule, the one place the JVM code says it (docs/rules.md, sections 1 and
 * 8): a send is a duplicate of its key's anchor, the accepted send whose window is open, when
 * it was sent at or after the anchor and before the anchor's window closes; else it is accepted
 * and becomes the anchor. The twin of {@code walk_loop} in dedup_lib/replay/walk.py. Both JVM
 * walks call it: {@code Replay} (the batch replay's kernel, one call per send of a sorted
 * partition) and {@code LiveMonitor} (the live monitor's judge on the executors, per key).
 */
public final class Anchor {
    private Anchor() {}

    /**
     * When the window of an anchor closes: the first instant it no longer catches a send.
     *
     * @param micros the anchor's send time, microseconds since the epoch (UTC)
     * @param window the window in microseconds
     * @return the closing time, microseconds since the epoch
     */
    public static long closes(long micros, long window) {
        return micros + window;
    }

    /**
     * Whether a send is a duplicate of the anchor.
     *
     * @param micros the anchor's send time, microseconds since the epoch (UTC)
     * @param closes when the anchor's window closes ({@link #closes})
     * @param t the send's time, microseconds since the epoch
     * @return true when the anchor catches the send
     */
    public static boolean catches(long micros, long closes, long t) {
        return micros <= t && t < closes;
    }
}
