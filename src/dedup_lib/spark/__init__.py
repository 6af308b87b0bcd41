"""Spark for the library: sessions (:mod:`~dedup_lib.spark.session`), Java
(:mod:`~dedup_lib.spark.java`), Spark's log (:mod:`~dedup_lib.spark.logs`), Spark Connect
(:mod:`~dedup_lib.spark.connect`), Spark's exceptions (:mod:`~dedup_lib.spark.failures`),
DataFrame helpers (:mod:`~dedup_lib.spark.frames`), the driver JVM's options
(:mod:`~dedup_lib.spark.jvm_options`) and a streaming query's start and the release of its
session (:mod:`~dedup_lib.spark.streaming`).

Everything else in ``dedup_lib`` takes a ``SparkSession`` and uses only the DataFrame API,
so the same code runs on a classic local session and on a Spark Connect server. Spark's own
log (log4j, the JVM's warnings, py4j's) goes to :func:`spark_log_path`, never to the
terminal, a notebook cell or a report.
"""

from __future__ import annotations

from dedup_lib.spark.connect import free_port, is_connect
from dedup_lib.spark.failures import spark_errors, spark_message
from dedup_lib.spark.frames import hashed, observed, to_pandas
from dedup_lib.spark.java import (
    MIN_JAVA,
    JavaNotFoundError,
    check_java,
    class_data_options,
    java_tool,
    java_version,
)
from dedup_lib.spark.logs import (
    LOG4J2_PROPERTIES,
    LOG_FORMAT,
    LOG_ROLL_BYTES,
    cache_dir,
    log_error,
    log_handler,
    output_to,
    spark_log_path,
)
from dedup_lib.spark.session import (
    JVM_TUNING,
    LOCAL_DEFAULTS,
    SESSION_SETTINGS,
    get_spark,
    local_cores,
)

__all__ = [
    "JVM_TUNING",
    "LOCAL_DEFAULTS",
    "LOG4J2_PROPERTIES",
    "LOG_FORMAT",
    "LOG_ROLL_BYTES",
    "MIN_JAVA",
    "SESSION_SETTINGS",
    "JavaNotFoundError",
    "cache_dir",
    "check_java",
    "class_data_options",
    "free_port",
    "get_spark",
    "hashed",
    "is_connect",
    "java_tool",
    "java_version",
    "local_cores",
    "log_error",
    "log_handler",
    "observed",
    "output_to",
    "spark_errors",
    "spark_log_path",
    "spark_message",
    "to_pandas",
]
