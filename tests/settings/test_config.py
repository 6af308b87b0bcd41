"""Entity settings from Resource Manager templates, az output and the emulator's Config.json,
validated the way the service would (SPEC.md section 4)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from dedup_lib import DedupPolicy
from dedup_lib.settings.load import load_entity_policies, load_entity_settings
from dedup_lib.settings.model import EntityConfigError, EntitySettings, entity_policies
from dedup_lib.telemetry.samples import sample_path

NS = "Microsoft.ServiceBus/namespaces"
SERVICE_WORDING = "The value supplied must be between 00:00:20 and 7.00:00:00"
EMULATOR_WORDING = "The value supplied must be between 00:00:05 and 00:05:00"


def write(tmp_path: Path, doc: object, name: str = "entities.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def template(*resources: dict, parameters: dict | None = None, **extra: object) -> dict:
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": parameters or {},
        "resources": list(resources),
        **extra,
    }


def namespace(sku: str | None = "Standard", name: str = "shop-sb", **extra: object) -> dict:
    body: dict = {"type": NS, "apiVersion": "2022-10-01-preview", "name": name, **extra}
    if sku is not None:
        body["sku"] = {"name": sku, "tier": sku}
    return body


def queue(name: str, kind: str = "queues", **properties: object) -> dict:
    return {
        "type": f"{NS}/{kind}",
        "apiVersion": "2022-10-01-preview",
        "name": name,
        "properties": properties,
    }


def settings(
    name: str = "orders",
    detection: bool = True,
    window: timedelta | None = None,
    partitioning: bool = False,
    source: str = "a.json: resources[1]",
    bounds: str = "service",
    tier: str | None = None,
) -> EntitySettings:
    return EntitySettings(
        name=name,
        kind="queue",
        requires_duplicate_detection=detection,
        window=window,
        partitioning=partitioning,
        requires_session=False,
        source=source,
        bounds=bounds,
        tier=tier,
    )


def raises(*fragments: str) -> pytest.RaisesExc[EntityConfigError]:
    """Expect an EntityConfigError whose message holds every fragment, in that order."""
    return pytest.raises(EntityConfigError, match=".*".join(re.escape(f) for f in fragments))


# --- Resource Manager templates ---------------------------------------------------------------


def test_arm_template_top_level_entities(tmp_path):
    path = write(
        tmp_path,
        template(
            namespace("Standard"),
            queue(
                "shop-sb/orders",
                requiresDuplicateDetection=True,
                duplicateDetectionHistoryTimeWindow="PT10M",
                requiresSession=True,
            ),
            queue(
                "shop-sb/events",
                "topics",
                requiresDuplicateDetection=True,
                duplicateDetectionHistoryTimeWindow="P1DT2H",
                enablePartitioning=True,
            ),
        ),
        "main.json",
    )
    orders, events = load_entity_settings(path)
    assert orders == EntitySettings(
        name="orders",
        kind="queue",
        requires_duplicate_detection=True,
        window=timedelta(minutes=10),
        partitioning=False,
        requires_session=True,
        source=f"{path}: resources[1]",
        bounds="service",
        tier="Standard",
    )
    assert (events.name, events.kind, events.window) == (
        "events",
        "topic",
        timedelta(days=1, hours=2),
    )
    assert events.partitioning is True
    assert load_entity_policies(path) == {
        "orders": DedupPolicy(timedelta(minutes=10)),
        "events": DedupPolicy(timedelta(days=1, hours=2), partitioning=True),
    }


def test_arm_defaults_when_properties_are_left_out(tmp_path):
    path = write(
        tmp_path,
        template(
            namespace(),
            queue("shop-sb/orders", requiresDuplicateDetection=True),
            queue("shop-sb/plain"),
        ),
    )
    orders, plain = load_entity_settings(path)
    assert orders.window is None
    assert orders.policy() == DedupPolicy(timedelta(minutes=10))
    assert (plain.requires_duplicate_detection, plain.partitioning, plain.requires_session) == (
        False,
        False,
        False,
    )
    assert plain.policy() is None


def test_arm_nested_child_resources_take_their_namespace_tier(tmp_path):
    child_queue = {
        "type": "queues",
        "apiVersion": "2022-10-01-preview",
        "name": "orders",
        "properties": {
            "requiresDuplicateDetection": True,
            "duplicateDetectionHistoryTimeWindow": "PT2M",
        },
    }
    child_topic = {
        "type": "topics",
        "name": "events",
        "properties": {"requiresDuplicateDetection": False},
        "resources": [{"type": "subscriptions", "name": "all", "properties": {}}],
    }
    path = write(tmp_path, template(namespace("Premium", resources=[child_queue, child_topic])))
    orders, events = load_entity_settings(path)
    assert (orders.name, orders.kind, orders.tier, orders.window) == (
        "orders",
        "queue",
        "Premium",
        timedelta(minutes=2),
    )
    assert orders.source == f"{path}: resources[0].resources[0]"
    assert (events.name, events.kind, events.tier) == ("events", "topic", "Premium")
    assert load_entity_policies(path) == {"orders": DedupPolicy("PT2M"), "events": None}


def test_arm_nested_child_with_a_full_type(tmp_path):
    child = queue("orders", requiresDuplicateDetection=True)
    path = write(tmp_path, template(namespace("Standard", resources=[child])))
    [orders] = load_entity_settings(path)
    assert (orders.name, orders.tier) == ("orders", "Standard")


@pytest.mark.parametrize(
    "name",
    [
        "shop-sb/orders",
        "orders",
        "[concat(parameters('ns'), '/orders')]",
        "[concat(parameters('ns'), '/', 'orders')]",
        "[format('{0}/orders', parameters('ns'))]",
        "[format('{0}/{1}', parameters('ns'), 'orders')]",
        "[format('{0}/{1}', parameters('ns'), parameters('queueName'))]",
        "[concat(parameters('ns'), '/', variables('queue'))]",
        "[concat(toLower(parameters('ns')), '/orders')]",
        "[ concat( parameters('ns') , '/orders' ) ]",
    ],
)
def test_arm_entity_names(tmp_path, name):
    doc = template(
        queue(name, requiresDuplicateDetection=True),
        parameters={
            "ns": {"type": "string"},
            "queueName": {"type": "string", "defaultValue": "orders"},
        },
        variables={"queue": "orders"},
    )
    [orders] = load_entity_settings(write(tmp_path, doc))
    assert orders.name == "orders"


@pytest.mark.parametrize(
    "name",
    [
        "[concat(parameters('ns'), '/', parameters('queueName'))]",
        "[format('{0}/{1}', parameters('ns'), parameters('queueName'))]",
        "[parameters('queueName')]",
        "[copyIndex()]",
        "shop-sb/",
        "",
        7,
    ],
)
def test_arm_undeterminable_name_is_a_clear_error(tmp_path, name):
    doc = template(queue(name), parameters={"queueName": {"type": "string"}})
    path = write(tmp_path, doc, "names.json")
    with raises("names.json: resources[0]: queue name", "cannot determine the entity name"):
        load_entity_settings(path)


def test_arm_parameters_resolve_from_default_values(tmp_path):
    doc = template(
        namespace("[parameters('sku')]", name="[parameters('ns')]"),
        queue(
            "[concat(parameters('ns'), '/orders')]",
            requiresDuplicateDetection="[parameters('dedup')]",
            duplicateDetectionHistoryTimeWindow="[parameters('Window')]",
            enablePartitioning="[variables('partitioned')]",
        ),
        parameters={
            "ns": {"type": "string", "defaultValue": "shop-sb"},
            "sku": {
                "type": "string",
                "defaultValue": "Premium",
                "allowedValues": ["Standard", "Premium"],
            },
            "dedup": {"type": "bool", "defaultValue": True},
            "window": {"type": "string", "defaultValue": "PT45M"},
        },
        variables={"partitioned": "[parameters('dedup')]"},
    )
    [orders] = load_entity_settings(write(tmp_path, doc))
    assert orders.requires_duplicate_detection is True
    assert orders.window == timedelta(minutes=45)
    assert orders.partitioning is True
    assert orders.tier == "Premium"


def test_arm_parameter_without_default_names_entity_property_and_expression(tmp_path):
    doc = template(
        queue(
            "shop-sb/orders",
            requiresDuplicateDetection=True,
            duplicateDetectionHistoryTimeWindow="[parameters('window')]",
        ),
        parameters={"window": {"type": "string"}},
    )
    path = write(tmp_path, doc, "infra.json")
    with raises(
        "infra.json: resources[0]: queue 'orders'",
        "properties.duplicateDetectionHistoryTimeWindow",
        "[parameters('window')]",
        "parameter 'window' has no defaultValue",
    ):
        load_entity_settings(path)


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("[if(parameters('prod'), 'PT1H', 'PT1M')]", "if() is not evaluated here"),
        ("[parameters('missing')]", "declares no parameter 'missing'"),
        ("[variables('missing')]", "declares no variable 'missing'"),
        ("[parameters('computed')]", "resourcegroup() is not evaluated here"),
        ("[parameters('window'))]", "cannot be evaluated here"),
    ],
)
def test_arm_expressions_that_cannot_be_evaluated(tmp_path, expression, why):
    doc = template(
        queue(
            "shop-sb/orders",
            requiresDuplicateDetection=True,
            duplicateDetectionHistoryTimeWindow=expression,
        ),
        parameters={
            "prod": {"type": "bool", "defaultValue": True},
            "window": {"type": "string", "defaultValue": "PT1M"},
            "computed": {"type": "string", "defaultValue": "[resourceGroup().tags.window]"},
        },
    )
    path = write(tmp_path, doc, "infra.json")
    with raises(
        "infra.json", "queue 'orders'", "duplicateDetectionHistoryTimeWindow", expression, why
    ):
        load_entity_settings(path)


def test_arm_escaped_bracket_is_a_literal(tmp_path):
    doc = template(queue("[[weird]/orders", requiresDuplicateDetection=True))
    [orders] = load_entity_settings(write(tmp_path, doc))
    assert orders.name == "orders"


def test_arm_symbolic_name_resources(tmp_path):
    doc = template(languageVersion="2.0")
    doc["resources"] = {
        "sb": namespace("Standard"),
        "orders": queue(
            "[format('{0}/{1}', 'shop-sb', 'orders')]",
            requiresDuplicateDetection=True,
            duplicateDetectionHistoryTimeWindow="PT3M",
        ),
    }
    path = write(tmp_path, doc)
    [orders] = load_entity_settings(path)
    assert orders.source == f"{path}: resources['orders']"
    assert (orders.window, orders.tier) == (timedelta(minutes=3), "Standard")


def test_arm_skips_existing_and_disabled_resources_and_subscriptions(tmp_path):
    existing = queue("shop-sb/legacy", requiresDuplicateDetection=True)
    existing["existing"] = True
    disabled = queue("shop-sb/later", requiresDuplicateDetection=True)
    disabled["condition"] = "[parameters('withLater')]"
    subscription = queue("shop-sb/events/all", "topics/subscriptions")
    doc = template(
        namespace(),
        existing,
        disabled,
        subscription,
        queue("shop-sb/orders"),
        parameters={"withLater": {"type": "bool", "defaultValue": False}},
    )
    assert [s.name for s in load_entity_settings(write(tmp_path, doc))] == ["orders"]


def test_arm_tier_matches_the_namespace_by_name(tmp_path):
    doc = template(
        namespace("Basic", name="[parameters('basicNs')]"),
        namespace("Premium", name="shop-premium"),
        queue("[concat(parameters('basicNs'), '/orders')]"),
        queue("shop-premium/payments", requiresDuplicateDetection=True),
        queue("elsewhere/audit"),
        parameters={"basicNs": {"type": "string"}},
    )
    tiers = {s.name: s.tier for s in load_entity_settings(write(tmp_path, doc))}
    assert tiers == {"orders": "Basic", "payments": "Premium", "audit": None}


def test_arm_tier_of_the_only_namespace_when_names_cannot_be_compared(tmp_path):
    doc = template(
        namespace("Premium", name="[parameters('ns')]"),
        queue("[concat(parameters('namespace'), '/orders')]"),
        queue("other-sb/audit"),
        parameters={"ns": {"type": "string"}, "namespace": {"type": "string"}},
    )
    tiers = {s.name: s.tier for s in load_entity_settings(write(tmp_path, doc))}
    assert tiers == {"orders": "Premium", "audit": "Premium"}
    doc = template(namespace("Premium"), queue("other-sb/orders"))
    [orders] = load_entity_settings(write(tmp_path, doc))
    assert orders.tier is None


def test_arm_nested_children_of_two_namespaces(tmp_path):
    doc = template(
        namespace("Basic", name="basic-sb", resources=[queue("audit")]),
        namespace("Premium", name="premium-sb", resources=[queue("orders")]),
    )
    tiers = {s.name: s.tier for s in load_entity_settings(write(tmp_path, doc))}
    assert tiers == {"audit": "Basic", "orders": "Premium"}


def test_arm_tier_left_to_the_deployment_is_unknown(tmp_path):
    doc = template(
        namespace("[parameters('sku')]"),
        queue("shop-sb/orders", requiresDuplicateDetection=True),
        parameters={"sku": {"type": "string"}},
    )
    [orders] = load_entity_settings(write(tmp_path, doc))
    assert orders.tier is None


def test_detection_on_a_basic_namespace_is_refused(tmp_path):
    doc = template(namespace("basic"), queue("shop-sb/orders", requiresDuplicateDetection=True))
    path = write(tmp_path, doc, "basic.json")
    with raises(
        "basic.json: resources[1]: queue 'orders'",
        "requiresDuplicateDetection true",
        "not available on the Basic tier",
    ):
        load_entity_settings(path)


def test_basic_namespace_without_detection_is_fine(tmp_path):
    doc = template(namespace("Basic"), queue("shop-sb/orders", requiresDuplicateDetection=False))
    [orders] = load_entity_settings(write(tmp_path, doc))
    assert orders.tier == "Basic"
    assert orders.policy() is None


def test_arm_template_without_entities(tmp_path):
    path = write(tmp_path, template(namespace()), "ns-only.json")
    with raises("ns-only.json", "without Microsoft.ServiceBus/namespaces/queues or topics"):
        load_entity_settings(path)
    deployment = {"type": "Microsoft.Resources/deployments", "name": "sb", "properties": {}}
    path = write(tmp_path, template(deployment), "modules.json")
    with raises("modules.json", "nested deployments or Bicep modules are not read"):
        load_entity_settings(path)


# --- az servicebus queue show / topic show ----------------------------------------------------


NAMESPACE_ID = "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/sb"


def az(name: str, kind: str = "Queues", **fields: object) -> dict:
    return {
        "id": f"{NAMESPACE_ID}/{kind.lower()}/{name}",
        "name": name,
        "type": f"Microsoft.ServiceBus/Namespaces/{kind}",
        **fields,
    }


def test_az_show_single_object(tmp_path):
    path = write(
        tmp_path,
        az(
            "orders",
            requiresDuplicateDetection=True,
            duplicateDetectionHistoryTimeWindow="PT10M",
            enablePartitioning=True,
            requiresSession=True,
        ),
        "orders.json",
    )
    [orders] = load_entity_settings(path)
    assert orders == EntitySettings(
        name="orders",
        kind="queue",
        requires_duplicate_detection=True,
        window=timedelta(minutes=10),
        partitioning=True,
        requires_session=True,
        source=str(path),
        bounds="service",
    )


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("PT10M", timedelta(minutes=10)),
        ("0:10:00", timedelta(minutes=10)),
        ("00:00:20", timedelta(seconds=20)),
        ("7.00:00:00", timedelta(days=7)),
        ("7 days, 0:00:00", timedelta(days=7)),
        ("1 day, 2:30:00", timedelta(days=1, hours=2, minutes=30)),
        ("P7D", timedelta(days=7)),
    ],
)
def test_az_duration_forms(tmp_path, text, window):
    path = write(
        tmp_path,
        az("orders", requiresDuplicateDetection=True, duplicateDetectionHistoryTimeWindow=text),
    )
    [orders] = load_entity_settings(path)
    assert orders.window == window
    assert load_entity_policies(path) == {"orders": DedupPolicy(window)}


def test_az_list_of_queues_and_topics(tmp_path):
    path = write(
        tmp_path,
        [
            az(
                "orders",
                requiresDuplicateDetection=True,
                duplicateDetectionHistoryTimeWindow="0:05:00",
            ),
            az(
                "events",
                "Topics",
                requiresDuplicateDetection=False,
                duplicateDetectionHistoryTimeWindow="0:10:00",
            ),
        ],
        "list.json",
    )
    orders, events = load_entity_settings(path)
    assert (orders.kind, orders.source) == ("queue", f"{path}: [0]")
    assert (events.kind, events.source, events.window) == (
        "topic",
        f"{path}: [1]",
        timedelta(minutes=10),
    )
    assert load_entity_policies(path) == {"orders": DedupPolicy("5m"), "events": None}


def test_az_older_cli_nests_properties(tmp_path):
    obj = az("orders")
    obj["properties"] = {
        "requiresDuplicateDetection": True,
        "duplicateDetectionHistoryTimeWindow": "0:02:00",
        "enablePartitioning": True,
    }
    [orders] = load_entity_settings(write(tmp_path, [obj]))
    assert (orders.requires_duplicate_detection, orders.window, orders.partitioning) == (
        True,
        timedelta(minutes=2),
        True,
    )


def test_az_kind_from_the_id_when_type_is_missing(tmp_path):
    obj = az("events", "Topics", requiresDuplicateDetection=True)
    del obj["type"]
    [events] = load_entity_settings(write(tmp_path, obj))
    assert events.kind == "topic"


def test_az_empty_list_is_no_entities(tmp_path):
    assert load_entity_settings(write(tmp_path, [])) == []


def test_az_list_with_something_else_in_it(tmp_path):
    subscription = az("all", "Topics/Subscriptions")
    path = write(tmp_path, [az("orders"), subscription], "mixed.json")
    with raises(
        "mixed.json: [1]", "Microsoft.ServiceBus/Namespaces/Topics/Subscriptions", "expected"
    ):
        load_entity_settings(path)


def test_az_entity_without_a_name(tmp_path):
    obj = az("orders")
    obj["name"] = ""
    with raises("nameless.json", "queue name", "expected the entity's name"):
        load_entity_settings(write(tmp_path, obj, "nameless.json"))


# --- the emulator's Config.json ---------------------------------------------------------------


def emulator(queues: list[dict], topics: list[dict] | None = None) -> dict:
    return {
        "UserConfig": {
            "Namespaces": [{"Name": "sbemulatorns", "Queues": queues, "Topics": topics or []}],
            "Logging": {"Type": "File"},
        }
    }


def test_emulator_config(tmp_path):
    doc = emulator(
        [
            {
                "Name": "queue.1",
                "Properties": {
                    "DeadLetteringOnMessageExpiration": False,
                    "DefaultMessageTimeToLive": "PT1H",
                    "DuplicateDetectionHistoryTimeWindow": "PT20S",
                    "LockDuration": "PT1M",
                    "MaxDeliveryCount": 3,
                    "RequiresDuplicateDetection": True,
                    "RequiresSession": True,
                },
            }
        ],
        [
            {
                "Name": "topic.1",
                "Properties": {"RequiresDuplicateDetection": False},
                "Subscriptions": [{"Name": "subscription.1", "Properties": {}}],
            }
        ],
    )
    path = write(tmp_path, doc, "Config.json")
    queue1, topic1 = load_entity_settings(path)
    assert queue1 == EntitySettings(
        name="queue.1",
        kind="queue",
        requires_duplicate_detection=True,
        window=timedelta(seconds=20),
        partitioning=False,
        requires_session=True,
        source=f"{path}: UserConfig.Namespaces[0].Queues[0]",
        bounds="emulator",
    )
    assert (topic1.kind, topic1.source) == ("topic", f"{path}: UserConfig.Namespaces[0].Topics[0]")
    assert load_entity_policies(path) == {
        "queue.1": DedupPolicy("PT20S", bounds="emulator"),
        "topic.1": None,
    }


def test_emulator_bounds(tmp_path):
    def one(window: str | None) -> Path:
        props: dict = {"RequiresDuplicateDetection": True}
        if window is not None:
            props["DuplicateDetectionHistoryTimeWindow"] = window
        return write(tmp_path, emulator([{"Name": "q", "Properties": props}]), "Config.json")

    assert load_entity_policies(one("PT5S")) == {"q": DedupPolicy("5s", bounds="emulator")}
    assert load_entity_policies(one("PT5M")) == {"q": DedupPolicy("5m", bounds="emulator")}
    with raises(
        "Config.json: UserConfig.Namespaces[0].Queues[0]: queue 'q'", "6m", EMULATOR_WORDING
    ):
        load_entity_settings(one("PT6M"))
    with raises("queue 'q'", "4s", EMULATOR_WORDING):
        load_entity_settings(one("PT4S"))
    with raises("queue 'q'", "10m (the default: no window given)", EMULATOR_WORDING):
        load_entity_settings(one(None))


def test_emulator_has_no_partitioning(tmp_path):
    doc = emulator([{"Name": "q", "Properties": {"EnablePartitioning": True}}])
    with raises(
        "Config.json", "queue 'q'", "EnablePartitioning true", "emulator has no partitioning"
    ):
        load_entity_settings(write(tmp_path, doc, "Config.json"))
    with raises("queue 'orders'", "emulator has no partitioning"):
        settings(partitioning=True, bounds="emulator")


# --- values the service would refuse, and files that cannot be read ---------------------------


@pytest.mark.parametrize("window", ["PT19S", "P7DT1S", "P8D", "PT0S", "0:00:10"])
def test_window_outside_service_bounds(tmp_path, window):
    doc = template(
        queue(
            "shop-sb/orders",
            requiresDuplicateDetection=True,
            duplicateDetectionHistoryTimeWindow=window,
        )
    )
    path = write(tmp_path, doc, "bounds.json")
    with raises(
        "bounds.json: resources[0]: queue 'orders'",
        "duplicateDetectionHistoryTimeWindow",
        SERVICE_WORDING,
    ):
        load_entity_settings(path)


@pytest.mark.parametrize("window", ["PT20S", "P7D", "7.00:00:00"])
def test_window_at_the_service_bounds(tmp_path, window):
    path = write(
        tmp_path,
        az("orders", requiresDuplicateDetection=True, duplicateDetectionHistoryTimeWindow=window),
    )
    assert load_entity_policies(path)["orders"] == DedupPolicy(window)


def test_window_given_while_detection_is_off_is_ignored(tmp_path):
    doc = template(
        queue(
            "shop-sb/orders",
            requiresDuplicateDetection=False,
            duplicateDetectionHistoryTimeWindow="P30D",
        )
    )
    path = write(tmp_path, doc)
    [orders] = load_entity_settings(path)
    assert orders.window == timedelta(days=30)
    assert load_entity_policies(path) == {"orders": None}


@pytest.mark.parametrize(
    ("value", "shown"),
    [("yes", '"yes"'), ("true", '"true"'), (1, "1"), ({"value": True}, '{"value": true}')],
)
def test_non_boolean_detection_flag(tmp_path, value, shown):
    path = write(tmp_path, [az("orders", requiresDuplicateDetection=value)], "flags.json")
    with raises(
        "flags.json: [0]: queue 'orders'",
        f"requiresDuplicateDetection {shown}",
        "expected true or false",
    ):
        load_entity_settings(path)


@pytest.mark.parametrize("window", ["T10M", "10m", "ten minutes", "PT", "600", 600, True, "-PT10M"])
def test_unreadable_duration(tmp_path, window):
    path = write(
        tmp_path,
        [az("orders", requiresDuplicateDetection=True, duplicateDetectionHistoryTimeWindow=window)],
        "durations.json",
    )
    with raises(
        "durations.json: [0]: queue 'orders'",
        f"duplicateDetectionHistoryTimeWindow {json.dumps(window)}",
        "expected an ISO 8601 duration such as PT10M",
    ):
        load_entity_settings(path)


def test_unreadable_duration_in_the_emulator_config(tmp_path):
    doc = emulator(
        [{"Name": "q", "Properties": {"DuplicateDetectionHistoryTimeWindow": "20 seconds"}}]
    )
    with raises("queue 'q'", 'DuplicateDetectionHistoryTimeWindow "20 seconds"', "ISO 8601"):
        load_entity_settings(write(tmp_path, doc))


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


# --- EntitySettings ---------------------------------------------------------------------------


def test_entity_settings_policy():
    assert settings(window=None).policy() == DedupPolicy(timedelta(minutes=10))
    assert settings(window=timedelta(hours=2), partitioning=True).policy() == DedupPolicy(
        "2h", partitioning=True
    )
    assert settings(detection=False, window=timedelta(days=30)).policy() is None
    assert settings(window=timedelta(minutes=1), bounds="emulator").policy() == DedupPolicy(
        "1m", bounds="emulator"
    )
    with raises("a.json: resources[1]: queue 'orders'", "8d", SERVICE_WORDING):
        settings(window=timedelta(days=8)).policy()
    with raises("queue 'orders'", "Basic tier"):
        settings(tier="Basic").policy()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kind": "subscription"}, "expected 'queue' or 'topic'"),
        ({"bounds": "none"}, "expected 'service' or 'emulator'"),
        ({"name": ""}, "expected a non-empty name"),
        ({"requires_session": "no"}, "requiresSession 'no': expected true or false"),
        ({"window": "PT10M"}, "expected a timedelta or None"),
    ],
)
def test_entity_settings_refuses_nonsense(changes, message):
    fields = {
        "name": "orders",
        "kind": "queue",
        "requires_duplicate_detection": True,
        "window": None,
        "partitioning": False,
        "requires_session": False,
        "source": "a.json",
        "bounds": "service",
        **changes,
    }
    with raises(message):
        EntitySettings(**fields)


# --- entity_policies: one entity described twice ---------------------------------------------


def test_identical_duplicates_are_fine():
    first = settings(window=timedelta(minutes=10), source="a.json: resources[1]")
    again = settings(window=None, source="b.json: [0]")
    off = settings(
        "audit", detection=False, window=timedelta(minutes=1), source="a.json: resources[2]"
    )
    off_again = settings("audit", detection=False, window=timedelta(days=2), source="b.json: [1]")
    assert entity_policies([first, off, again, off_again]) == {
        "orders": DedupPolicy("10m"),
        "audit": None,
    }


def test_detection_cannot_differ():
    with raises(
        "entity 'orders'",
        "requiresDuplicateDetection is true in a.json: resources[1]",
        "but false in b.json: [0]",
        "duplicate detection cannot be changed after an entity is created",
    ):
        entity_policies([settings(), settings(detection=False, source="b.json: [0]")])


def test_partitioning_cannot_differ():
    with raises(
        "entity 'orders'",
        "enablePartitioning is false in a.json: resources[1]",
        "but true in b.json: [0]",
        "partitioning cannot be changed after an entity is created",
    ):
        entity_policies([settings(), settings(partitioning=True, source="b.json: [0]")])
    with raises("partitioning cannot be changed"):
        entity_policies(
            [settings(detection=False), settings(detection=False, partitioning=True, source="b")]
        )


def test_different_windows_are_ambiguous():
    with raises(
        "entity 'orders'",
        "duplicateDetectionHistoryTimeWindow is 10m (the default) in a.json: resources[1]",
        "but 5m in b.json: [0]",
        "ambiguous",
    ):
        entity_policies([settings(), settings(window=timedelta(minutes=5), source="b.json: [0]")])


def test_entity_policies_validates_each_entity():
    with raises("queue 'orders'", SERVICE_WORDING):
        entity_policies([settings(window=timedelta(seconds=5))])


def test_load_entity_policies_reads_several_files(tmp_path):
    arm = write(
        tmp_path,
        template(namespace(), queue("shop-sb/orders", requiresDuplicateDetection=True)),
        "arm.json",
    )
    cli = write(tmp_path, [az("audit")], "az.json")
    assert load_entity_policies(arm, cli) == {"orders": DedupPolicy(), "audit": None}
    assert load_entity_policies() == {}


# --- the shipped samples ----------------------------------------------------------------------

DAY_ENTITIES = {"orders", "payments", "notifications", "inventory", "audit"}
PRODUCTION = {
    "orders": DedupPolicy("PT10M"),
    "payments": DedupPolicy("PT10M", partitioning=True),
    "notifications": DedupPolicy("PT5M"),
    "inventory": DedupPolicy("PT1H"),
    "audit": None,
}


def test_arm_sample():
    path = sample_path("entities-arm.json")
    found = {s.name: s for s in load_entity_settings(path)}
    assert set(found) == DAY_ENTITIES
    assert {s.tier for s in found.values()} == {"Standard"}
    assert found["notifications"].kind == "topic"
    assert found["payments"].requires_session is True
    assert found["orders"].source.endswith("entities-arm.json: resources[1]")
    assert load_entity_policies(path) == PRODUCTION


def test_az_sample():
    path = sample_path("entities-az.json")
    found = {s.name: s for s in load_entity_settings(path)}
    assert set(found) == DAY_ENTITIES
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    assert any(o["duplicateDetectionHistoryTimeWindow"] == "0:10:00" for o in raw)
    assert load_entity_policies(path) == PRODUCTION


def test_emulator_sample():
    path = sample_path("entities-emulator.json")
    assert {s.name for s in load_entity_settings(path)} == DAY_ENTITIES
    assert load_entity_policies(path) == {
        "orders": DedupPolicy("PT5M", bounds="emulator"),
        "payments": DedupPolicy("PT1M", bounds="emulator"),
        "notifications": DedupPolicy("PT2M", bounds="emulator"),
        "inventory": DedupPolicy("PT30S", bounds="emulator"),
        "audit": None,
    }


def test_samples_of_one_deployment_agree_and_of_two_do_not():
    arm, cli = sample_path("entities-arm.json"), sample_path("entities-az.json")
    assert load_entity_policies(arm, cli) == PRODUCTION
    with raises("entity 'orders'", "10m", "5m", "entities-emulator.json", "ambiguous"):
        load_entity_policies(arm, sample_path("entities-emulator.json"))


def test_day_parquet_entities_all_have_settings():
    import pyarrow.parquet as pq

    table = pq.read_table(sample_path("day.parquet"), columns=["entity"])
    assert set(table.column("entity").unique().to_pylist()) == DAY_ENTITIES
