"""The judge on a Spark Connect server: the relation a client sends for it, and the options a
server needs to answer it.

A Connect client has no JVM to call the processor through: it sends a plan, and the server
builds it. The judge reaches the server as an extension relation (a ``google.protobuf.Any``
of type :data:`TYPE_NAME`), which ``java/LiveMonitorPlugin.java``, a relation plugin in the
server, turns into the processor over the relation's input. The plugin must be in the server
when it starts (its jar on the class path and its class in :data:`RELATIONS`): a Connect
client cannot add one (:func:`server_options` says how). The message names the client's jar,
and a server with another version's refuses it: both sides judge by the same code.

The message is built with protobuf's own descriptors at run time: no generated code, and the
plugin reads its fields by number.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame

#: The plugin's class, and the server's setting that names relation plugins.
PLUGIN_CLASS = "dedup_lib.LiveMonitorPlugin"
RELATIONS = "spark.connect.extensions.relation.classes"
#: The message the relation carries; the plugin answers an ``Any`` of this type only.
TYPE_NAME = "dedup_lib.LiveMonitorRelation"
#: The message of the resends' relation (:mod:`~dedup_lib.live.executors.resends`), whose
#: third field is the horizon in microseconds.
RESENDS_TYPE = "dedup_lib.ResendMonitorRelation"


def server_options(jar: str) -> list[str]:
    """The options of ``start-connect-server.sh`` (or ``spark-submit``) that give a Connect
    server the judge in ``jar``: on its class path and its executors', and its plugin named.

    Examples
    --------
    >>> server_options("/cache/dedup-live-0123.jar")  # doctest: +NORMALIZE_WHITESPACE
    ['--jars', '/cache/dedup-live-0123.jar',
     '--conf', 'spark.connect.extensions.relation.classes=dedup_lib.LiveMonitorPlugin']
    """
    return ["--jars", jar, "--conf", f"{RELATIONS}={PLUGIN_CLASS}"]


def judged_on_server(
    sends: DataFrame, names: Sequence[str], lateness_ms: int, jar: str, kind: str = TYPE_NAME
) -> DataFrame:
    """``sends`` (a Connect DataFrame) judged by the server's plugin with the processor's
    column ``names`` and ``lateness_ms``, the client's ``jar`` named for the server to check
    (``kind``: the message's type, which the plugin answers when it is :data:`TYPE_NAME`,
    or :data:`RESENDS_TYPE` for the resends, ``lateness_ms`` then the horizon in
    microseconds).
    Nothing is sent until the frame is used."""
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
    from pyspark.sql.connect.plan import LogicalPlan

    message = _message_class(kind)(columns=list(names), lateness_ms=lateness_ms, jar=jar)

    class Judged(LogicalPlan):
        """The extension relation over ``sends``' plan."""

        def plan(self, session: Any) -> Any:
            relation = self._create_proto_relation()
            child: Any = self._child
            message.input = child.plan(session).SerializeToString()
            relation.extension.Pack(message)
            return relation

    connect: Any = sends
    judged: DataFrame = ConnectFrame(Judged(connect._plan), connect.sparkSession)
    return judged


@cache
def _message_class(kind: str) -> Any:
    """The relation's message class of type ``kind``, from a descriptor built here: ``input``
    (the input relation, serialized), ``columns``, ``lateness_ms`` and ``jar``, fields 1 to
    4."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    package, name = kind.split(".")
    file = descriptor_pb2.FileDescriptorProto(
        name=f"{package}/live_monitor.proto", package=package, syntax="proto3"
    )
    message = file.message_type.add(name=name)
    for number, (title, sort, label) in enumerate(
        (
            ("input", field.TYPE_BYTES, field.LABEL_OPTIONAL),
            ("columns", field.TYPE_STRING, field.LABEL_REPEATED),
            ("lateness_ms", field.TYPE_INT64, field.LABEL_OPTIONAL),
            ("jar", field.TYPE_STRING, field.LABEL_OPTIONAL),
        ),
        start=1,
    ):
        message.field.add(name=title, number=number, type=sort, label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(kind))
