"""The refusals of one request's entries, logged in a bounded number of lines.

An admin request may name a hundred thousand entries in 1 MB (topics, partitions, resources),
each refused on its own (an unknown topic, a partition past the request's cap). A log line for
each costs tens of microseconds and as many lines in the broker's log for one request: a client
could fill the disk with refusals. Kafka logs a request's results in one line. ``RefusalLog``
logs the first ``LOGGED_REFUSALS_MAX`` refusals one by one, as before (each message cut at
``LOGGED_MESSAGE_CHARS_MAX``), and counts the rest by error code in one line at the end
(``close``).

Not thread-safe: one per request, on the loop that handles it.
"""

from __future__ import annotations

import logging
from collections import Counter

from odradek.errors import ErrorCode

__all__ = ["LOGGED_MESSAGE_CHARS_MAX", "LOGGED_REFUSALS_MAX", "RefusalLog"]

LOGGED_REFUSALS_MAX = 10  # refusals of one request logged one by one; the rest are counted
# A refusal's message in the log is cut here: one can name every key of a request (Kafka's
# "Null value not supported for : ..."), a megabyte. The client still gets all of it.
LOGGED_MESSAGE_CHARS_MAX = 500


class RefusalLog:
    """``refused`` for each entry refused, then ``close`` once (see the module docstring)."""

    def __init__(self, logger: logging.Logger, what: str, level: int = logging.INFO):
        self.logger = logger
        self.what = what  # "CreateTopics", "reassignment": the start of each line
        self.level = level
        self.logged = 0
        self.unlogged: Counter[str] = Counter()

    def refused(self, entry: object, error: ErrorCode, message: str | None) -> None:
        if self.logged < LOGGED_REFUSALS_MAX:
            self.logged += 1
            if message is not None and len(message) > LOGGED_MESSAGE_CHARS_MAX:
                message = f"{message[:LOGGED_MESSAGE_CHARS_MAX]}... ({len(message)} characters)"
            self.logger.log(self.level, "%s %s: %s %s", self.what, entry, error.name, message)
        else:
            self.unlogged[error.name] += 1

    def close(self) -> None:
        """One line for the refusals not logged on their own, if any."""
        if self.unlogged:
            self.logger.log(
                self.level,
                "%s: %d more entries of the same request refused (%s)",
                self.what,
                sum(self.unlogged.values()),
                ", ".join(f"{name} x{n}" for name, n in self.unlogged.most_common()),
            )
            self.unlogged.clear()
