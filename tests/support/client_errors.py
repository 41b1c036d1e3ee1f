"""What a real client is told when a broker refuses it, for the security tests."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

__all__ = ["librdkafka_errors"]

WAIT_S = 10.0


def librdkafka_errors(config: dict, wait_s: float = WAIT_S) -> list[KafkaError]:
    """The errors librdkafka reports (``error_cb``) for ``config`` within ``wait_s``: an admin
    client connects at once, so a refused authentication shows here."""
    errors: list[KafkaError] = []
    admin = AdminClient({**config, "error_cb": errors.append})
    deadline = time.monotonic() + wait_s
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    return errors
