"""load_entity_settings and load_entity_policies: format detection, files that cannot be read,
several files together, and the shipped samples."""

from __future__ import annotations

import json

from dedup_lib import DedupPolicy
from dedup_lib.settings.load import load_entity_policies, load_entity_settings
from dedup_lib.telemetry.samples import sample_path
from settings_kit import DAY_ENTITIES, PRODUCTION, az, namespace, queue, raises, template, write


def test_not_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"resources": [\n  {"type": }\n]}', encoding="utf-8")
    with raises("broken.json: not JSON (line 2, column", "expected one of", "Config.json"):
        load_entity_settings(path)


def test_unknown_format_names_the_formats_understood(tmp_path):
    path = write(tmp_path, {"queues": [{"name": "orders"}]}, "other.json")
    with raises(
        "other.json: unknown format",
        "Resource Manager template",
        "az servicebus queue show",
        "emulator's Config.json",
    ):
        load_entity_settings(path)
    with raises("scalar.json: unknown format"):
        load_entity_settings(write(tmp_path, "PT10M", "scalar.json"))


def test_missing_file(tmp_path):
    with raises("nowhere.json: cannot read it"):
        load_entity_settings(tmp_path / "nowhere.json")


def test_utf16_output_of_windows_powershell(tmp_path):
    path = tmp_path / "az.json"
    path.write_bytes(json.dumps([az("orders", requiresDuplicateDetection=True)]).encode("utf-16"))
    assert load_entity_policies(path) == {"orders": DedupPolicy()}


def test_load_entity_policies_reads_several_files(tmp_path):
    arm = write(
        tmp_path,
        template(namespace(), queue("shop-sb/orders", requiresDuplicateDetection=True)),
        "arm.json",
    )
    cli = write(tmp_path, [az("audit")], "az.json")
    assert load_entity_policies(arm, cli) == {"orders": DedupPolicy(), "audit": None}
    assert load_entity_policies() == {}


def test_samples_of_one_deployment_agree_and_of_two_do_not():
    arm, cli = sample_path("entities-arm.json"), sample_path("entities-az.json")
    assert load_entity_policies(arm, cli) == PRODUCTION
    with raises("entity 'orders'", "10m", "5m", "entities-emulator.json", "ambiguous"):
        load_entity_policies(arm, sample_path("entities-emulator.json"))


def test_day_parquet_entities_all_have_settings():
    import pyarrow.parquet as pq

    table = pq.read_table(sample_path("day.parquet"), columns=["entity"])
    assert set(table.column("entity").unique().to_pylist()) == DAY_ENTITIES
