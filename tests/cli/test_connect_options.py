"""``dedup-lib connect-options``: the options a Spark Connect server starts with for the state
on the executors, one line a shell splits into them: the judge's jar (built, holding the
plugin and the processor) and the relation plugin's class. The cluster test starts its
Connect server with them (tests/cluster_kit.py)."""

from __future__ import annotations

import shlex
import zipfile

from dedup_lib.cli import main
from dedup_lib.live.executors.connect import PLUGIN_CLASS, RELATIONS


def test_the_options_name_the_built_jar_and_the_plugin(capsys):
    assert main(["connect-options"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("\n") == 1
    jars, jar, conf, setting = shlex.split(printed)
    assert (jars, conf, setting) == ("--jars", "--conf", f"{RELATIONS}={PLUGIN_CLASS}")
    with zipfile.ZipFile(jar) as archive:
        held = set(archive.namelist())
    assert {"dedup_lib/LiveMonitorPlugin.class", "dedup_lib/LiveMonitor.class"} <= held
