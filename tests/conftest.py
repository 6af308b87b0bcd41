"""One Spark session per test run, and each Spark test on the kind of session it needs.

Tests that take the ``spark`` fixture run on a classic local session. Those marked
``connect`` run again on a local Spark Connect server: each entry point of the public API, and
what can differ between the two kinds of session (a path the server resolves, an error it
raises, loads on threads of one session, a stream whose micro-batches run in the server, Arrow
conversions). What cannot differ (another plan of the same operations, other data) runs once,
on classic.
With pytest-xdist the classic pass is two units (:data:`SESSION_UNIT`,
:data:`SECOND_SESSION_UNIT`) and the Connect pass one (:data:`CONNECT_UNIT`), each taken whole
by one worker; a worker that meets both kinds stops the classic session before the Connect one
starts (one process cannot hold both), and the Connect pass comes after every classic unit.
``SPARK_REMOTE`` set in the environment runs every Spark test on Connect alone, against that
server.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from class_data_kit import write_class_data
from codegen_kit import INTERPRETED, compiled, configured
from dedup_lib import get_spark
from dedup_lib.live.executors.connect import PLUGIN_CLASS, RELATIONS
from dedup_lib.live.executors.processor import jar_path
from hostile_kit import IMG, Corpus, write_corpus
from lab_kit import FORGET, Lab, LabMissingError

settings.register_profile(
    "default",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# CI runs the default: each property's generated cases are Spark jobs, and 60 instead of 40
# cost make test half a minute of its 15. HYPOTHESIS_PROFILE=thorough runs 500.
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# The driver's memory is the library's default (4g), as users run it: with 2g, the four shapes
# test_samples loads at once ran the session's JVM out of heap in CI (2026-11-27), and every
# later test of the session failed with it.
#
# One shuffle partition: on the tests' tens to thousands of rows each further partition is a
# task per stage that only costs (tests/analysis: 0.85x the time of three partitions, in one
# run). The tests of what depends on keys spread over partitions (the replay's shuffle, hashed
# frames) take :func:`spread_keys`.
TEST_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    **INTERPRETED,
}
#: The shuffle partitions of :func:`spread_keys`: more than the local master's two cores.
SPREAD = "3"

MODES = ["connect"] if os.environ.get("SPARK_REMOTE") else ["classic", "connect"]


@pytest.fixture(scope="session", params=MODES)
def spark(request: pytest.FixtureRequest) -> Iterator[object]:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    # The live monitor's judge in a local Connect server, as ``watch --state executors``
    # starts one (:mod:`dedup_lib.live.executors.connect`); in the classic session too,
    # whose JVM a worker's Connect server runs in after it: the server loads the plugin from
    # the class path the JVM started with.
    config = {**TEST_CONFIG, "spark.jars": str(jar_path()), RELATIONS: PLUGIN_CLASS}
    if request.param == "classic":
        session = get_spark("dedup-tests", master="local[2]", config=config)
    else:
        remote = os.environ.get("SPARK_REMOTE", "local[2]")
        session = get_spark("dedup-tests", remote=remote, config=config)
    yield session
    session.stop()


@pytest.fixture
def spread_keys(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test's shuffles spread keys over :data:`SPREAD` partitions, not the run's one: for
    the tests of what must hold however the keys are spread (autouse in tests/replay). Tests
    without Spark pass through."""
    if "spark" not in request.fixturenames:
        yield
        return
    with configured(request.getfixturevalue("spark"), {"spark.sql.shuffle.partitions": SPREAD}):
        yield


@pytest.fixture(scope="module")
def compiled_expressions(spark: Any) -> Iterator[None]:
    """Spark compiles expressions for the module's tests (:mod:`codegen_kit`): for those that
    replay the day sample. Module-scoped, so the module's own fixtures are built compiled too."""
    with compiled(spark):
        yield


@pytest.fixture
def compiled_test(spark: Any) -> Iterator[None]:
    """Spark compiles expressions for this test: one that replays the day sample."""
    with compiled(spark):
        yield


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One JupyterLab for every test that runs notebooks in it (tests/browser, and the
    analysts' own data headless), serving a temporary copy of notebooks/; its kernels import
    this checkout's src/. Stopped, with its kernels, however the tests end."""
    try:
        server = Lab.start(tmp_path_factory.mktemp("jupyterlab"))
    except LabMissingError as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def kernel(lab: Lab) -> str:
    """One kernel, and so one Spark, for every notebook these tests run, each after the names
    and widgets of the one before are gone, as an analyst points one kernel at notebook after
    notebook. A kernel's first notebook pays Spark's start and the JVM's warm-up, 30-35 s
    measured on the samples; the next ones do not."""
    return lab.start_kernel()


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The hostile corpus (``hostile_kit``), written once per run."""
    return write_corpus(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="session")
def hostile_report(
    hostile: Corpus, tmp_path_factory: pytest.TempPathFactory, lab: Lab, kernel: str
) -> Path:
    """``dedup-lib postmortem`` on the hostile corpus, for its hostile entity, checked against
    its hostile export: the report's path. Its notebook runs in JupyterLab's kernel, whose
    Spark is warm, not in a kernel of its own (a cold JVM: 50 core-seconds more); the command
    with its own kernel is test_wheel's and tests/cli's. Made before any page follows the
    kernel (:data:`REPORT_FIRST`), after the names of the notebooks before it are gone."""
    import papermill

    from dedup_lib.cli import main

    out = tmp_path_factory.mktemp("hostile-report")
    argv = ["postmortem", str(hostile.sends), "--entity", IMG, "--kept", str(hostile.kept)]
    lab.run(kernel, FORGET)
    execute = papermill.execute_notebook
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(papermill, "execute_notebook", partial(execute, km=lab.manager(kernel)))
        assert main([*argv, "--out-dir", str(out), "--quiet"]) == 0
    (report,) = out.glob("*.html")
    return report


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the units off the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, classic_only = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        mode = callspec.params.get("spark") if callspec is not None else None
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if mode == "connect" and len(MODES) > 1 and item.get_closest_marker("connect") is None:
            classic_only.append(item)
            continue
        if mode is not None:
            item.user_properties.append((PASS, mode))
        unit = _unit(item, mode)
        if unit is not None:
            item.add_marker(pytest.mark.xdist_group(unit))
        kept.append(item)
    if classic_only:
        config.hook.pytest_deselected(items=classic_only)
    items[:] = sorted(kept, key=_lab_order)


#: Run before every other test of JupyterLab's kernel: no page is open yet to follow the
#: widgets their notebooks make in it (a notebook 02 page the explorer's tests keep open took
#: 52 core-seconds doing that, 2026-11-28).
HEADLESS_FIRST = "tests/workbench/test_user_data.py"
#: Run next: the tests of the hostile postmortem report, which is made in the same kernel
#: while no page follows it either, and no page of theirs does.
REPORT_FIRST = "hostile_report"


def _lab_order(item: pytest.Item) -> int:
    """The headless notebooks first, the hostile report's tests next, then the rest."""
    if item.nodeid.startswith(HEADLESS_FIRST):
        return 0
    return 1 if REPORT_FIRST in getattr(item, "fixturenames", ()) else 2


#: The test report's property naming the Spark pass a test ran on (classic, connect).
PASS = "spark_pass"
#: The unit of the tests on the run's own classic Spark session.
SESSION_UNIT = "spark-session"
#: A second unit on a classic session of its own: the command lines' and the live monitor's
#: tests (:data:`SECOND_SESSION`), a third of the classic pass, which wait on processes and
#: servers of their own. One unit held the whole pass, 15 minutes on one worker: make test
#: could not end sooner, whatever the other worker did.
SECOND_SESSION_UNIT = "spark-session-2"
#: The folders and modules whose classic tests are :data:`SECOND_SESSION_UNIT`'s.
SECOND_SESSION = ("tests/cli/", "tests/live/", "tests/test_command_lines.py")
#: The unit of the same tests' Connect pass, on a local Spark Connect server: a unit of its
#: own, so that the worker that ends JupyterLab's unit takes it while the other still runs the
#: classic pass (one worker ran both passes, for minutes after the other had nothing left).
CONNECT_UNIT = "spark-connect"
#: The unit of the tests that share JupyterLab, its kernel and Chromium (tests/browser), with
#: the postmortem report of the hostile corpus that the browser opens too, and the notebooks
#: on the analysts' own data, run in the same kernel.
LAB_UNIT = "lab"
#: The folder of the notebooks that nbval runs where Chromium cannot (tests/browser/conftest.py),
#: each notebook a unit: spread over the workers, its cells lost the names earlier ones made.
NOTEBOOKS = "notebooks/"
#: The units a worker takes whole, longest first: the run's own classic Spark session,
#: JupyterLab, the Connect pass, and the modules whose fixtures start something costly (a
#: venv, a cluster). Every other test is a unit of its own, taken after these by whichever
#: worker is free.
#: The tests on the standalone cluster: one cluster serves them all (tests/cluster/conftest.py).
CLUSTER_UNIT = "tests/cluster"
UNITS = (
    SESSION_UNIT,
    LAB_UNIT,
    SECOND_SESSION_UNIT,  # before the Connect pass: a worker may end on Connect, not start
    CONNECT_UNIT,
    "tests/test_wheel.py",
    CLUSTER_UNIT,
)


def _unit(item: pytest.Item, mode: str | None) -> str | None:
    """The unit of :data:`UNITS` that ``item`` belongs to, if any (``--dist loadgroup``):
    the tests on a classic session in two units, each held by one JVM; every test of the
    Connect pass (``mode``), so that one server does; the tests that share JupyterLab; a
    costly module."""
    fixtures = getattr(item, "fixturenames", ())
    module = item.nodeid.partition("::")[0]
    if module.startswith(f"{CLUSTER_UNIT}/"):
        return CLUSTER_UNIT
    if "spark" in fixtures:
        if mode == "connect":
            return CONNECT_UNIT
        return SECOND_SESSION_UNIT if module.startswith(SECOND_SESSION) else SESSION_UNIT
    if module.startswith("tests/browser/") or {"hostile_report", "lab"} & set(fixtures):
        return LAB_UNIT
    if module.startswith(NOTEBOOKS):
        return module  # nbval runs a notebook's cells in order, in one kernel: one worker's
    return module if module in UNITS else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """pytest-xdist's ``loadgroup`` keeps a unit together by a suffix it adds to the tests' ids,
    which pytest 9.2 no longer takes (pytest-xdist issue 1386): the units would be spread
    over the workers, each starting its own Spark, without a word. Stop instead."""
    if node.config.getvalue("dist") == "loadgroup" and ids and not any("@" in i for i in ids):
        pytest.exit(
            "pytest-xdist's --dist loadgroup lost its units with this pytest (pytest-xdist "
            "issue 1386): install pytest<9.2 (pip install -e '.[test]')",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


class _LongestFirst:
    """The tests in :data:`UNITS`' order, each test's order within its unit kept: with
    ``--no-loadscope-reorder`` pytest-xdist hands the units out in the order they come, so
    one worker starts the Spark session's at once while the other takes the rest."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        rank = {unit: i for i, unit in enumerate(UNITS)}

        def order(item: pytest.Item) -> int:
            mark = item.get_closest_marker("xdist_group")
            return rank.get(mark.args[0] if mark else "", len(UNITS))

        items.sort(key=order)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_LongestFirst(), "dedup-longest-first")


#: Marks of the tests that start a JVM (their own Spark, a kernel's, a command line's).
JVM_MARKS = ("spark", "browser", "cluster", "slow")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the first test that starts a JVM: the run's class-data archive, written. Each
    pytest-xdist worker collects, and so comes here: the first writes the archive while the
    others wait for it, under a lock of the run's own (``filelock``)."""
    if any(item.get_closest_marker(m) for item in session.items for m in JVM_MARKS):
        write_class_data()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Where the run's time went, by folder and Spark pass (setup and teardown included), and
    by worker: the whole suite has a 15-minute budget, and the slowest tests alone do not say
    what to cut. With workers, the folders' minutes add up to more than the run's."""
    spent: Counter[tuple[str, str]] = Counter()
    workers: Counter[str] = Counter()
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                folder = report.nodeid.split("::")[0].rpartition("/")[0]
                spark_pass = dict(report.user_properties).get(PASS, "no Spark")
                spent[folder, str(spark_pass)] += report.duration
                node = getattr(report, "node", None)
                workers[getattr(getattr(node, "gateway", None), "id", "main")] += report.duration
    if not spent:
        return
    kinds = ("classic", "connect", "no Spark")
    folders = sorted(
        {folder for folder, _ in spent}, key=lambda f: -sum(spent[f, k] for k in kinds)
    )
    write = terminalreporter.write_line
    terminalreporter.section("time by folder and Spark pass, minutes")
    write(f"{'folder':24s}" + "".join(f"{kind:>10s}" for kind in kinds) + f"{'total':>10s}")
    rows = [(folder, [spent[folder, kind] for kind in kinds]) for folder in folders]
    rows.append(("all", [sum(v for (_, k), v in spent.items() if k == kind) for kind in kinds]))
    for folder, row in rows:
        write(f"{folder:24s}" + "".join(f"{v / 60:10.1f}" for v in row) + f"{sum(row) / 60:10.1f}")
    if len(workers) > 1:
        write("by worker: " + ", ".join(f"{w} {v / 60:.1f}" for w, v in sorted(workers.items())))


#: The longest parameter shown whole in a test's id.
LONGEST_ID = 60


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A long text parameter (a hostile 20 MB window) named by its head and its length: the id
    travels in every report between pytest-xdist's workers and into the JUnit XML."""
    if isinstance(val, str) and len(val) > LONGEST_ID:
        head = val[:20].encode("unicode_escape").decode("ascii")
        return f"{head}...({len(val):,} characters)"
    return None
