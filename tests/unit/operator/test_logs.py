"""A pass that waits is logged (and posted as an event) at INFO; real errors keep their level."""

import logging

from odradek_operator import logs


def _record(level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord("kopf.objects", level, __file__, 1, message, None, None)


def test_a_temporary_failure_is_lowered_to_info():
    record = _record(logging.ERROR, "Handler 'cluster_changed' failed temporarily: waiting for pod")
    assert logs.TemporaryIsInfo().filter(record)
    assert (record.levelno, record.levelname) == (logging.INFO, "INFO")


def test_other_errors_keep_their_level():
    record = _record(logging.ERROR, "Handler 'cluster_changed' failed with an exception.")
    assert logs.TemporaryIsInfo().filter(record)
    assert record.levelno == logging.ERROR


def test_install_adds_one_filter_to_kopfs_object_logger():
    logs.install()
    logs.install()
    logger = logging.getLogger(logs.KOPF_OBJECTS_LOGGER)
    assert sum(isinstance(f, logs.TemporaryIsInfo) for f in logger.filters) == 1
