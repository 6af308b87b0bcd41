"""load_entity_settings and load_entity_policies: format detection, files that cannot be read,
several files together, and the shipped samples."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from dedup_lib import DedupPolicy
from dedup_lib.settings import load
from dedup_lib.settings.load import load_entity_policies, load_entity_settings
from dedup_lib.settings.model import EntityConfigError
from dedup_lib.telemetry.samples import sample_path
from settings_kit import (
    DAY_ENTITIES,
    NS,
    PRODUCTION,
    az,
    namespace,
    queue,
    raises,
    template,
    write,
)


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
    assert load_entity_policies([arm, cli]) == {"orders": DedupPolicy(), "audit": None}
    assert load_entity_policies([]) == {}


def test_samples_of_one_deployment_agree_and_of_two_do_not():
    arm, cli = sample_path("entities-arm.json"), sample_path("entities-az.json")
    assert load_entity_policies([arm, cli]) == PRODUCTION
    with raises("entity 'orders'", "10m", "5m", "entities-emulator.json", "ambiguous"):
        load_entity_policies([arm, sample_path("entities-emulator.json")])


def test_day_parquet_entities_all_have_settings():
    import pyarrow.parquet as pq

    table = pq.read_table(sample_path("day.parquet"), columns=["entity"])
    assert set(table.column("entity").unique().to_pylist()) == DAY_ENTITIES


def short_and_named(error: pytest.ExceptionInfo[EntityConfigError], path: Path) -> str:
    """The message, checked: it names the file, is one short escaped line besides the path."""
    message = str(error.value)
    assert message.startswith(f"{path}: ")
    assert len(message.replace(str(path), "")) < 300
    assert not any(c in message for c in "\x00\x07\x1b\n\u202e")
    return message


def az_queue_bytes(**fields: object) -> bytes:
    return json.dumps([az("orders", **{"requiresDuplicateDetection": True, **fields})]).encode()


HOSTILE_FILES = [
    pytest.param(b"[" * 10_000 + b"]" * 10_000, "nested too deeply", id="arrays-10000-deep"),
    pytest.param(b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "nested too deeply", id="objects"),
    pytest.param(bytes(range(256)) * 8, "not JSON", id="binary"),
    pytest.param(b"\xff\xd8\xff\xe0\x00\x10JFIF", "not text", id="jpeg"),
    pytest.param(b"", "the file is empty", id="empty"),
    pytest.param(b" \r\n\t", "the file is empty", id="blank"),
    pytest.param(codecs.BOM_UTF8, "the file is empty", id="bom-only"),
    pytest.param(b"null", "unknown format (a JSON null)", id="null"),
    pytest.param(b"42", "unknown format (a JSON number)", id="number"),
    pytest.param(b'"PT10M"', "unknown format (a JSON string)", id="string"),
    pytest.param(b"true", "unknown format (a JSON boolean)", id="boolean"),
    pytest.param(b"[1, 2]", "unknown format (a JSON array)", id="array-of-numbers"),
    pytest.param(b"9" * 5000, "not JSON", id="5000-digit-number"),
    pytest.param(b'{"resources": [\x00]}', "not JSON (line 1, column 16", id="nul"),
    pytest.param(
        b'[{"type": "Microsoft.ServiceBus/Namespaces/Queues", "name": "a", "name": "b"}]',
        "the key 'name' appears twice",
        id="duplicate-key",
    ),
    pytest.param(
        az_queue_bytes(duplicateDetectionHistoryTimeWindow="P" + "9" * 20_000_000 + "D"),
        "(20,000,004 characters): expected an ISO 8601 duration",
        id="20MB-window",
    ),
    pytest.param(
        az_queue_bytes(duplicateDetectionHistoryTimeWindow="P99999999999D"),
        "duplicateDetectionHistoryTimeWindow 'P99999999999D' is too long",
        id="overflowing-window",
    ),
    pytest.param(
        az_queue_bytes(duplicateDetectionHistoryTimeWindow="0:99:99"),
        "duplicateDetectionHistoryTimeWindow '0:99:99' is not a TimeSpan: days must be",
        id="timespan-out-of-range",
    ),
    pytest.param(
        json.dumps([az("o" * 20_000_000, duplicateDetectionHistoryTimeWindow=1)]).encode(),
        "queue 'oooooooo",
        id="20MB-name",
    ),
    pytest.param(
        az_queue_bytes(requiresDuplicateDetection="\x1b]0;owned\x07" * 10_000),
        "requiresDuplicateDetection '\"\\u001b]0;owned\\u0007",
        id="control-characters",
    ),
    pytest.param(
        json.dumps([az("or\x1b[2J\u202eders", requiresDuplicateDetection=1)]).encode(),
        "queue 'or\\x1b[2J\\u202eders': requiresDuplicateDetection 1",
        id="escape-in-name",
    ),
    pytest.param(
        json.dumps({"UserConfig": {"Namespaces": "x" * 1_000_000}}).encode(),
        "UserConfig.Namespaces: expected an array, got '\"xxxx",
        id="emulator-1MB-namespaces",
    ),
    pytest.param(
        json.dumps([{"type": NS + "/queues", "name": "q", "properties": ["x"] * 100_000}]).encode(),
        'properties: expected an object, got \'["x", "x"',
        id="az-properties-array",
    ),
]


@pytest.mark.parametrize(("content", "why"), HOSTILE_FILES)
def test_hostile_files_are_one_clear_error_naming_the_file(tmp_path, content, why):
    path = tmp_path / "entities.json"
    path.write_bytes(content)
    with pytest.raises(EntityConfigError) as caught:
        load_entity_settings(path)
    assert why in short_and_named(caught, path)


def test_resources_nested_past_the_recursion_limit(tmp_path):
    entity = json.dumps(queue("shop-sb/orders", requiresDuplicateDetection=True))
    level = '{"type": "Microsoft.Resources/deployments", "name": "d", "resources": ['
    path = tmp_path / "nested.json"
    path.write_text('{"resources": [' + level * 2_000 + entity + "]}" * 2_001, encoding="utf-8")
    with pytest.raises(EntityConfigError) as caught:
        load_entity_settings(path)
    assert "nested too deeply" in short_and_named(caught, path)


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("[" + "concat(" * 10_000 + "'P1D'" + ")" * 10_000 + "]", "nests calls over 50 deep"),
        ("[parameters(" + "9" * 5_000 + ")]", "(5,000 characters) is too large"),
        ("[parameters('" + "w" * 1_000_000 + "')]", "declares no parameter 'wwww"),
    ],
)
def test_hostile_template_expressions(tmp_path, expression, why):
    doc = template(
        namespace(),
        queue(
            "shop-sb/orders",
            requiresDuplicateDetection=True,
            duplicateDetectionHistoryTimeWindow=expression,
        ),
    )
    path = write(tmp_path, doc, "infra.json")
    with pytest.raises(EntityConfigError) as caught:
        load_entity_settings(path)
    assert why in short_and_named(caught, path)


@pytest.mark.parametrize(
    "encode",
    [
        pytest.param(lambda text: codecs.BOM_UTF8 + text.encode("utf-8"), id="utf-8-bom"),
        pytest.param(lambda text: text.encode("utf-16"), id="utf-16-bom"),
        pytest.param(lambda text: codecs.BOM_UTF16_BE + text.encode("utf-16-be"), id="utf-16-be"),
        pytest.param(lambda text: text.encode("utf-32"), id="utf-32-bom"),
    ],
)
def test_unicode_files_with_a_bom_load(tmp_path, encode):
    path = tmp_path / "az.json"
    path.write_bytes(encode(json.dumps([az("orders", requiresDuplicateDetection=True)])))
    assert load_entity_policies(path) == {"orders": DedupPolicy()}


def test_fifty_thousand_entities_load(tmp_path):
    doc = [az(f"q{i}", requiresDuplicateDetection=True) for i in range(50_000)]
    path = write(tmp_path, doc, "many.json")
    assert len(load_entity_settings(path)) == 50_000


def test_a_directory_is_not_a_settings_file(tmp_path):
    with pytest.raises(EntityConfigError) as caught:
        load_entity_settings(tmp_path)
    assert "cannot read it" in short_and_named(caught, tmp_path)


def test_files_larger_than_any_settings_file_are_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(load, "MAX_FILE_BYTES", 1024)
    path = write(tmp_path, [az(f"q{i}") for i in range(100)], "huge.json")
    with pytest.raises(EntityConfigError) as caught:
        load_entity_settings(path)
    assert "more than any settings file holds" in short_and_named(caught, path)


def test_a_file_name_with_control_characters_is_escaped(tmp_path):
    path = tmp_path / "evil\x1b[2J.json"
    path.write_bytes(b"null")
    with raises("evil\\x1b[2J.json: unknown format"):
        load_entity_settings(path)
