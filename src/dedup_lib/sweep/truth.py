"""Ground truth from the cache: what a window does to messages, not only to sends.

With ``logical_id`` and ``attempt`` in the input, each repeated send belongs to a message.
The numbering of messages and what does not depend on the window are computed once
(:func:`truth_codes`); a window's accepted sends then give the table of
:func:`~dedup_lib.analysis.summaries.ground_truth_summary` with a few ``bincount`` calls
(:func:`truth_table`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.analysis.summaries import TRUTH_SUMMARY_COLUMNS
from dedup_lib.analysis.totals import NO_ENTITY, with_total
from dedup_lib.sweep.frames import frame_of


@dataclass(frozen=True)
class TruthCodes:
    """Repeated sends numbered by message, and the window-independent counts.

    Per repeated row: ``message`` (its message's number), ``resend`` (attempt > 1) and
    ``row_entity_code``. Per message: ``message_entity``, ``elsewhere`` (its sends accepted
    whatever the window) and ``rows_per_message``. ``fixed`` has per entity name (in
    ``entities``, numbered as the codes) the messages, sends, resends, extra deliveries of
    messages outside repeated keys (``settled_extra``) and ``messages_rejected``."""

    message: np.ndarray
    messages: int
    message_entity: np.ndarray
    entities: list[str]
    elsewhere: np.ndarray
    resend: np.ndarray
    row_entity_code: np.ndarray
    rows_per_message: np.ndarray
    fixed: pd.DataFrame


def message_codes(entity: np.ndarray, logical_id: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """One number per message (entity and logical_id, a null id being one message as in
    Spark's grouping), in order of first appearance, and the first row of each message."""
    entity_code, _ = pd.factorize(entity)
    id_code, ids = pd.factorize(logical_id, use_na_sentinel=False)
    code, firsts = pd.factorize(entity_code.astype(np.int64) * max(len(ids), 1) + id_code)
    first = np.zeros(len(firsts), dtype=np.int64)
    first[code[::-1]] = np.arange(len(code) - 1, -1, -1)
    return code, first


@dataclass(frozen=True)
class RepeatedMessages:
    """The messages of the repeated sends: ``code`` per send, and per message its entity's
    number in ``entities``, logical_id, repeated sends (``repeated``) and number
    (``message``)."""

    code: np.ndarray
    messages: pd.DataFrame
    entities: np.ndarray


def repeated_messages(
    rows: pd.DataFrame, entity: np.ndarray, entities: np.ndarray
) -> RepeatedMessages:
    """:class:`RepeatedMessages` of ``rows`` (the cache's repeated sends, whose entities are
    numbered ``entity`` into the names ``entities``): numbered while Spark still counts the
    messages."""
    code, first = message_codes(entity, rows["logical_id"])
    messages = pd.DataFrame(
        {
            "entity": entity[first],
            "logical_id": rows["logical_id"].iloc[first].reset_index(drop=True),
            "repeated": np.bincount(code, minlength=len(first)),
            "message": np.arange(len(first)),
        }
    )
    return RepeatedMessages(code, messages, entities)


def accepted_elsewhere(
    repeated: RepeatedMessages, messages: pa.Table
) -> tuple[np.ndarray, pd.DataFrame]:
    """Per repeated send, the sends of its message that are accepted whatever the window
    (outside repeated keys, not rejected); and per entity the messages, the extra deliveries
    of messages with no send in a repeated key, and the messages whose every send was
    rejected. ``messages`` has one row per message with several sends not rejected, one per
    entity for the others."""
    # Filtered before leaving Arrow: integer ids without the nulls of the other rows stay
    # integers, exact.
    several = frame_of(messages.filter(messages["several"]))
    numbers = pd.Series(np.arange(len(repeated.entities)), index=repeated.entities)
    named = several["entity"].map(numbers).fillna(-1).to_numpy(dtype=np.int64)
    message = _message_numbers(repeated.messages, named, several["logical_id"])
    hit = message >= 0
    elsewhere = np.zeros(len(repeated.messages), dtype=np.int64)
    elsewhere[message[hit]] = (
        several["unrejected"].to_numpy()[hit]
        - repeated.messages["repeated"].to_numpy()[message[hit]]
    )
    # A message with no send in a repeated key is delivered once per send not rejected.
    settled = several[~hit]
    extra = (settled["unrejected"] - 1).groupby(settled["entity"]).sum()
    totals = messages.select(["entity", "messages", "messages_rejected"]).to_pandas()
    totals = totals.groupby("entity")[["messages", "messages_rejected"]].sum()
    totals.insert(1, "extra_deliveries", extra.reindex(totals.index, fill_value=0))
    return elsewhere[repeated.code], totals.astype("int64").reset_index()


def _message_numbers(
    repeated: pd.DataFrame, entity: np.ndarray, logical_id: pd.Series
) -> np.ndarray:
    """The number of the repeated message (a row of ``repeated``, one per message) that each
    message ``entity`` (a code; -1: an entity with no repeated send) and ``logical_id`` is, -1
    where none. The ids of both are numbered together, then the pairs: a repeated message's
    pair comes first, so its number is its row, sooner than a merge finds it
    (docs/decisions/query-shapes.md)."""
    known = len(repeated)
    ids = pd.concat([repeated["logical_id"], logical_id], ignore_index=True)
    id_code, distinct = pd.factorize(ids, use_na_sentinel=False)
    entities = np.concatenate([repeated["entity"].to_numpy(dtype=np.int64), entity])
    number, _ = pd.factorize(entities * max(len(distinct), 1) + id_code)
    found = number[known:]
    return np.where(found < known, found, -1)


def truth_codes(
    repeated: pd.DataFrame,
    fixed: pd.DataFrame,
    truth_fixed: pd.DataFrame,
    entity_code: np.ndarray,
    entities: list[str],
) -> TruthCodes:
    """The message numbering of ``repeated`` (the cache's rows, whose entities are numbered
    ``entity_code`` into ``entities``) and the counts no window changes, from ``fixed``
    (sends outside repeated keys) and ``truth_fixed`` (messages)."""
    message, first = message_codes(entity_code, repeated["logical_id"])
    elsewhere = np.zeros(len(first))
    elsewhere[message] = repeated["accepted_elsewhere"].to_numpy(dtype=float)
    resend = repeated["attempt"].to_numpy() > 1
    row_entity = np.asarray(entities, dtype=object)[entity_code]
    return TruthCodes(
        message=message,
        messages=len(first),
        message_entity=entity_code[first],
        entities=entities,
        elsewhere=elsewhere,
        resend=resend,
        row_entity_code=entity_code,
        rows_per_message=np.bincount(message, minlength=len(first)),
        fixed=_per_entity(row_entity, resend, fixed, truth_fixed),
    )


def _per_entity(
    row_entity: np.ndarray, resend: np.ndarray, fixed: pd.DataFrame, truth_fixed: pd.DataFrame
) -> pd.DataFrame:
    """Messages and sends per entity, and the messages with no send in a repeated key:
    what does not depend on the window."""
    frame = pd.DataFrame({"entity": row_entity, "resend": resend})
    fixed = fixed.assign(entity=fixed["entity"].fillna(NO_ENTITY))
    sends = fixed.groupby("entity")[["sends", "resends"]].sum()
    repeated = frame.groupby("entity").agg(sends=("resend", "size"), resends=("resend", "sum"))
    sends = sends.add(repeated, fill_value=0)
    settled = truth_fixed.assign(entity=truth_fixed["entity"].fillna(NO_ENTITY))
    settled = settled.set_index("entity")
    table = pd.concat([settled[["messages"]], sends], axis=1)
    table["settled_extra"] = settled["extra_deliveries"].reindex(table.index).fillna(0)
    table["messages_rejected"] = settled["messages_rejected"].reindex(table.index).fillna(0)
    return table


def truth_table(m: TruthCodes, accepted: np.ndarray) -> pd.DataFrame:
    """:func:`~dedup_lib.analysis.summaries.ground_truth_summary` when the repeated sends
    ``accepted`` are the ones a window accepts: per entity and in total, resends caught, extra
    deliveries, messages lost and first sends dropped."""
    duplicate = ~accepted
    entities = len(m.entities)

    def per_entity(codes: np.ndarray, where: np.ndarray) -> np.ndarray:
        return np.bincount(codes[where], minlength=entities)

    accepted_sends = np.bincount(m.message[accepted], minlength=m.messages)
    delivered = accepted_sends + m.elsewhere
    lost = (delivered == 0) & (m.rows_per_message > accepted_sends)
    extra = np.bincount(
        m.message_entity, weights=np.clip(delivered - 1, 0, None), minlength=entities
    )
    moving = pd.DataFrame(
        {
            "resends_caught": per_entity(m.row_entity_code, m.resend & duplicate),
            "extra_deliveries": extra,
            "messages_lost": per_entity(m.message_entity, lost),
            "first_sends_dropped": per_entity(m.row_entity_code, ~m.resend & duplicate),
        },
        index=pd.Index(m.entities, name="entity"),
    )
    table = m.fixed[["messages", "sends", "resends"]].join(moving, how="left").fillna(0)
    table["extra_deliveries"] += m.fixed["settled_extra"]
    table["messages_rejected"] = m.fixed["messages_rejected"]
    table = table.astype("int64").rename_axis("entity").reset_index()
    return with_total(table, list(TRUTH_SUMMARY_COLUMNS[1:]))[list(TRUTH_SUMMARY_COLUMNS)]


def less_rejected(messages: pa.Table, rejected: pa.Table) -> pa.Table:
    """The messages' table counted from every send (``unrejected`` holding the sends of each
    message), with the ``rejected`` sends of each message (``entity``, ``logical_id``,
    ``rejected``) taken off: the table the pass gives when it judges each send. A null
    logical_id is one message per entity, as Spark groups it; the ids stay in Arrow, exact."""
    if rejected.num_rows == 0:
        return messages
    several = messages.filter(messages["several"])
    taken = _rejected_of(several, rejected)
    unrejected = pc.subtract(several["unrejected"], taken)
    still = pc.greater_equal(unrejected, 2)
    repeated = several.filter(still).set_column(
        several.schema.get_field_index("unrejected"), "unrejected", unrejected.filter(still)
    )
    fewer = pd.DataFrame(
        {
            "entity": several["entity"].filter(pc.invert(still)).to_pandas(),
            "unrejected": unrejected.filter(pc.invert(still)).to_pandas(),
        }
    )
    singles = messages.filter(pc.invert(messages["several"])).to_pandas()
    lost = _rejected_singles(several, rejected)
    per_entity = _per_entity_once(singles, fewer, lost)
    rest = pa.Table.from_pandas(per_entity, schema=messages.schema, preserve_index=False)
    return pa.concat_tables([repeated, rest])


def _rejected_of(several: pa.Table, rejected: pa.Table) -> pa.Array:
    """Per message sent several times, its rejected sends (0 for most)."""
    numbered = several.select(["entity", "logical_id"]).append_column(
        "__row", pa.array(np.arange(several.num_rows))
    )
    joined = numbered.join(rejected, keys=["entity", "logical_id"], join_type="inner")
    taken = np.zeros(several.num_rows, dtype=np.int64)
    taken[joined["__row"].to_numpy()] = joined["rejected"].to_numpy()
    null_ids = rejected.filter(pc.is_null(rejected["logical_id"]))
    if null_ids.num_rows:
        by_entity = dict(
            zip(null_ids["entity"].to_pylist(), null_ids["rejected"].to_pylist(), strict=True)
        )
        entities = several["entity"].to_pylist()
        for row in np.flatnonzero(pc.is_null(several["logical_id"]).to_numpy(zero_copy_only=False)):
            taken[row] = by_entity.get(entities[row], 0)
    return pa.array(taken)


def _rejected_singles(several: pa.Table, rejected: pa.Table) -> pd.Series:
    """Per entity, the messages sent once whose send was rejected: the rejected messages
    that are not among those sent several times."""
    alone = rejected.join(
        several.select(["entity", "logical_id"]), ["entity", "logical_id"], join_type="left anti"
    )
    with_null = several.filter(pc.is_null(several["logical_id"]))["entity"].to_pylist()
    frame = alone.to_pandas()
    if len(frame):
        frame = frame[~(frame["logical_id"].isna() & frame["entity"].isin(with_null))]
    counted: pd.Series = frame.groupby("entity")["rejected"].size()
    return counted


def _per_entity_once(singles: pd.DataFrame, fewer: pd.DataFrame, lost: pd.Series) -> pd.DataFrame:
    """The one row per entity of the messages that are not delivered several times: those
    sent once (``singles``, from the pass), those sent several times of which fewer than two
    sends were not rejected (``fewer``), and among the first the ``lost`` (rejected)."""
    once = singles.set_index("entity")["messages"]
    entities = once.index.union(pd.Index(fewer["entity"].unique()))
    once = once.reindex(entities, fill_value=0)
    lost = lost.reindex(entities, fill_value=0)
    few = fewer.groupby("entity")["unrejected"]
    none_left = fewer[fewer["unrejected"] == 0].groupby("entity").size()
    table = pd.DataFrame(
        {
            "entity": entities,
            "several": False,
            "logical_id": None,
            "messages": once + few.size().reindex(entities, fill_value=0),
            "messages_rejected": lost + none_left.reindex(entities, fill_value=0),
            "unrejected": np.maximum(
                (once > lost).astype(np.int64), few.max().reindex(entities, fill_value=0)
            ),
        }
    )
    return table.reset_index(drop=True)


def truth_columns(truth: pd.Series, catchable: int) -> dict[str, float]:
    """The ground-truth columns of a sweep row, from the total row of
    :meth:`ReplayCache.ground_truth_summary` and the resends any window can catch."""
    resends = int(truth["resends"])
    caught = truth["resends_caught"]
    return {
        "resends": resends,
        "catchable_resends": catchable,
        "resends_caught": int(caught),
        "share_catchable_caught": caught / catchable if catchable else float("nan"),
        "share_resends_caught": caught / resends if resends else float("nan"),
        "extra_deliveries": int(truth["extra_deliveries"]),
        "messages_lost": int(truth["messages_lost"]),
    }
