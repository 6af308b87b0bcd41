"""spark.failures: a Spark error's first meaningful line, without the Py4J and Java prefixes;
the exceptions Spark raises."""

from __future__ import annotations

from pyspark.errors import PySparkException

from dedup_lib.spark import spark_message
from dedup_lib.spark.failures import spark_errors


def test_spark_message_drops_the_py4j_and_java_prefixes():
    text = (
        "An error occurred while calling o42.parquet.\n"
        ": org.apache.spark.SparkException: [FAILED_READ_FILE] cannot read\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.x(Q.scala:1)"
    )
    assert spark_message(text) == "cannot read"


def test_a_message_is_its_first_meaningful_line_or_the_error_s_name() -> None:
    assert spark_message(": java.io.IOException: disk full\nmore") == "disk full"
    assert spark_message("[PATH_NOT_FOUND] Path does not exist: x. SQLSTATE: 42K03") == (
        "Path does not exist: x."
    )
    assert spark_message("") == "Spark error"
    assert spark_message(ValueError()) == "ValueError"


def test_spark_s_exceptions_are_those_of_both_kinds_of_session() -> None:
    errors = spark_errors()
    assert PySparkException in errors
    assert all(issubclass(error, BaseException) for error in errors)
