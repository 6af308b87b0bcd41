"""spark.java: which Java runs Spark, read from its banner; a clear message where Java 17+ is
missing."""

from __future__ import annotations

import os

import pytest

from dedup_lib.spark import JavaNotFoundError, check_java, java_version
from fakes import fake_java


@pytest.mark.parametrize(
    ("banner", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "11.0.2" 2019-01-15', 11),
    ],
)
def test_java_version_reads_the_banner(tmp_path, banner, major):
    assert java_version(str(fake_java(tmp_path, banner) / "bin" / "java")) == major


def test_old_java_is_refused_with_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "11.0.2"')))
    with pytest.raises(JavaNotFoundError, match=r"needs Java 17\+.*is Java 11.*openjdk"):
        check_java()


def test_missing_java_is_refused_with_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match=r"no `java` on PATH or JAVA_HOME.*SPARK_REMOTE"):
        check_java()


def test_this_machine_has_java_17_or_newer():
    assert check_java() >= 17, os.environ.get("JAVA_HOME")
