"""Entity labels: only names Service Bus allows, at most a budget of them, the configured
entities first."""

from __future__ import annotations

import pytest

from dedup_lib.live.output.labels import ENTITIES, INVALID, OTHER, EntityLabels


@pytest.mark.parametrize(
    "name",
    ["orders", "a", "orders.v2", "team/orders-eu_1", "O" * 260, "9lives"],
)
def test_a_name_service_bus_allows_is_its_own_label(name):
    assert EntityLabels().label(name) == name


@pytest.mark.parametrize(
    "name",
    ['<b>"ord\\ers"</b> & {x}', "-orders", "orders-", "o" * 261, "ord ers", "é", "a\nb", "x}"],
)
def test_a_name_service_bus_refuses_is_counted_as_invalid(name):
    labels = EntityLabels()
    assert labels.label(name) == INVALID
    assert labels.given == set(), "an invalid name takes no place in the budget"


def test_past_the_budget_names_are_other_and_configured_names_keep_theirs():
    labels = EntityLabels(reserved=["payments", "<bad>"], budget=3)
    got = [labels.label(f"queue-{i}") for i in range(4)]
    assert got == ["queue-0", "queue-1", OTHER, OTHER]
    assert labels.label("payments") == "payments", "reserved before the flood"
    assert labels.label("queue-0") == "queue-0", "a name given stays given"


def test_a_restart_gives_the_checkpoint_s_labels_again():
    labels = EntityLabels(budget=2)
    labels.restore(["orders", OTHER, INVALID, ""])
    assert labels.given == {"orders"}
    assert labels.label("payments") == "payments"
    assert labels.label("audit") == OTHER


def test_the_default_budget():
    labels = EntityLabels()
    assert [labels.label(f"q{i}") for i in range(ENTITIES + 1)][-1] == OTHER


def test_the_example_runs():
    import doctest

    from dedup_lib.live.output import labels

    assert doctest.testmod(labels).failed == 0
