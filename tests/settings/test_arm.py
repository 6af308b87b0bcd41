"""Entity settings from Resource Manager templates and Bicep compiled to JSON: names, nesting,
expressions, tiers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dedup_lib import DedupPolicy
from dedup_lib.settings.load import load_entity_policies, load_entity_settings
from dedup_lib.settings.model import EntitySettings
from dedup_lib.telemetry.samples import sample_path
from settings_kit import DAY_ENTITIES, PRODUCTION, namespace, queue, raises, template, write


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


def test_arm_sample():
    path = sample_path("entities-arm.json")
    found = {s.name: s for s in load_entity_settings(path)}
    assert set(found) == DAY_ENTITIES
    assert {s.tier for s in found.values()} == {"Standard"}
    assert found["notifications"].kind == "topic"
    assert found["payments"].requires_session is True
    assert found["orders"].source.endswith("entities-arm.json: resources[1]")
    assert load_entity_policies(path) == PRODUCTION
