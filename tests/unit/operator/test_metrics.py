"""The operator's metrics: one operation in progress per cluster at a time, in its own registry."""

from __future__ import annotations

from odradek_operator import metrics


def value(name: str, **labels) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, labels)


def test_operation_in_progress_is_one_type_at_a_time():
    metrics.record_operation("ns", "m", {"type": "ScaleUp"})
    assert (
        value(
            "odradek_operator_operations_in_progress", namespace="ns", cluster="m", type="ScaleUp"
        )
        == 1
    )
    metrics.record_operation("ns", "m", {"type": "Idle"})
    for type_ in metrics.OPERATION_TYPES:
        assert (
            value(
                "odradek_operator_operations_in_progress", namespace="ns", cluster="m", type=type_
            )
            == 0
        )


def test_counters_by_kind_and_reason():
    before = value("odradek_operator_errors_total", kind="OdradekTopic", reason="X") or 0
    metrics.ERRORS.labels("OdradekTopic", "X").inc()
    assert value("odradek_operator_errors_total", kind="OdradekTopic", reason="X") == before + 1
