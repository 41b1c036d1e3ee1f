"""Waiting is not an error: kopf logs every TemporaryError at ERROR, and posts it as a Kubernetes
event of type Error. The operator raises one each time a pass waits for the world (the next pod
of a rolling restart to be ready, a reassignment to finish) and for an unreachable cluster: both
expected, both retried, both described in the resource's status. ``TemporaryIsInfo`` lowers
those records to INFO (so the events are Normal); everything else keeps its level.
"""

from __future__ import annotations

import logging

KOPF_OBJECTS_LOGGER = "kopf.objects"
_TEMPORARY = " failed temporarily"


class TemporaryIsInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and _TEMPORARY in record.getMessage():
            record.levelno = logging.INFO
            record.levelname = logging.getLevelName(logging.INFO)
        return True


def install() -> None:
    """Idempotent: one filter on kopf's per-object logger."""
    logger = logging.getLogger(KOPF_OBJECTS_LOGGER)
    if not any(isinstance(f, TemporaryIsInfo) for f in logger.filters):
        logger.addFilter(TemporaryIsInfo())
