package dedup_lib;

import java.io.File;
import java.util.List;
import java.util.Optional;

import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.ByteString;
import org.sparkproject.connect.protobuf.InvalidProtocolBufferException;
import org.sparkproject.connect.protobuf.UnknownFieldSet;

/**
 * The live monitor's judge on a Spark Connect server: a relation plugin (named in the server's
 * {@code spark.connect.extensions.relation.classes}) that turns dedup_lib's extension relation
 * into {@link LiveMonitor#apply} over its input, and its relation of the resends into {@link
 * ResendMonitor#apply}.
 *
 * <p>The relation is a {@code google.protobuf.Any} of type {@link #TYPE}, whose message the
 * client builds (dedup_lib/live/executors/connect.py): field 1 the input relation (serialized),
 * 2 the column names {@code apply} takes, in its order, 3 the lateness in milliseconds (the
 * horizon in microseconds for {@link #RESENDS}), 4 the name of the client's jar of this class.
 * The fields are read as protobuf's unknown fields, so
 * nothing but Spark's own shaded protobuf is needed. A server started with another version's
 * jar refuses the relation, naming both: the two sides must judge by the same code.
 */
public final class LiveMonitorPlugin implements RelationPlugin {
    /** The type of the {@code Any} this plugin answers; others go to the next plugin. */
    public static final String TYPE = "type.googleapis.com/dedup_lib.LiveMonitorRelation";
    /** The type of the {@code Any} of the resends ({@link ResendMonitor#apply}). */
    public static final String RESENDS = "type.googleapis.com/dedup_lib.ResendMonitorRelation";

    @Override
    public Optional<LogicalPlan> transform(byte[] relation, SparkConnectPlanner planner) {
        Any any;
        UnknownFieldSet fields;
        try {
            any = Any.parseFrom(relation);
            if (!TYPE.equals(any.getTypeUrl()) && !RESENDS.equals(any.getTypeUrl())) {
                return Optional.empty();
            }
            fields = UnknownFieldSet.parseFrom(any.getValue());
        } catch (InvalidProtocolBufferException e) {
            return Optional.empty();
        }
        String wanted = text(fields, 4);
        String served = servedJar();
        if (!wanted.equals(served)) {
            throw new IllegalStateException(
                    "DEDUP_LIB_JAR_MISMATCH: this Spark Connect server judges with " + served
                            + " and the client's dedup-lib with " + wanted
                            + ": restart the server with the options `dedup-lib connect-options`"
                            + " prints on the client's machine");
        }
        Relation input;
        try {
            input = Relation.parseFrom(bytes(fields, 1));
        } catch (InvalidProtocolBufferException e) {
            throw new IllegalArgumentException("dedup_lib's relation has no valid input", e);
        }
        boolean resends = RESENDS.equals(any.getTypeUrl());
        String[] c = names(fields, resends ? 6 : 10);
        List<Long> figure = fields.getField(3).getVarintList();
        long number = figure.isEmpty() ? 0L : figure.get(0);
        LogicalPlan plan = planner.transformRelation(input);
        Dataset<Row> sends = org.apache.spark.sql.classic.Dataset.ofRows(planner.session(), plan);
        Dataset<Row> judged = resends
                ? ResendMonitor.apply(sends, c[0], c[1], c[2], c[3], c[4], c[5], number)
                : LiveMonitor.apply(
                        sends, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], number);
        return Optional.of(((org.apache.spark.sql.classic.Dataset<Row>) judged).logicalPlan());
    }

    /** The relation's {@code count} column names (field 2), in the processor's order. */
    private static String[] names(UnknownFieldSet fields, int count) {
        List<ByteString> names = fields.getField(2).getLengthDelimitedList();
        if (names.size() != count) {
            throw new IllegalArgumentException(
                    "dedup_lib's relation names " + names.size() + " columns, not " + count);
        }
        String[] c = new String[count];
        for (int i = 0; i < count; i++) {
            c[i] = names.get(i).toStringUtf8();
        }
        return c;
    }

    /** The file name of the jar this class was loaded from ("?" when not from a jar). */
    static String servedJar() {
        try {
            File from = new File(
                    LiveMonitorPlugin.class.getProtectionDomain().getCodeSource().getLocation()
                            .toURI());
            return from.getName();
        } catch (Exception e) {
            return "?";
        }
    }

    private static ByteString bytes(UnknownFieldSet fields, int number) {
        List<ByteString> found = fields.getField(number).getLengthDelimitedList();
        return found.isEmpty() ? ByteString.EMPTY : found.get(0);
    }

    private static String text(UnknownFieldSet fields, int number) {
        return bytes(fields, number).toStringUtf8();
    }
}
