"""spark.jvm_options: an option quoted for spark-submit's parser, one option whatever it holds;
ours after the driver JVM's own. No Spark."""

from __future__ import annotations

from dedup_lib.spark.jvm_options import quoted_option, with_java_options


def test_an_option_is_quoted_whole_with_its_quotes_and_backslashes_escaped() -> None:
    assert quoted_option("-Dlog=/a folder/x.log") == '"-Dlog=/a folder/x.log"'
    assert quoted_option('-Dx=say "hi" \\ bye') == '"-Dx=say \\"hi\\" \\\\ bye"'


def test_ours_come_after_the_driver_jvm_s_own_options() -> None:
    key = "spark.driver.extraJavaOptions"
    mine = {key: "-Xss4m", "spark.ui.enabled": "false"}
    assert with_java_options(mine, ["-XX:+UseParallelGC", '"-Da=b c"']) == {
        key: '-Xss4m -XX:+UseParallelGC "-Da=b c"',
        "spark.ui.enabled": "false",
    }
    assert with_java_options({}, ["-Xmx1g"]) == {key: "-Xmx1g"}
    assert with_java_options({}, []) == {key: ""}
