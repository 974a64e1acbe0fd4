"""A logging handler that keeps every error kafka_edu logs: the tests that feed nonsense to a broker or
a client assert that nothing failed inside it (a failure turned into an error code is not logged)."""
from __future__ import annotations

import logging


class LoggedErrors(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class LoggedTracebacks(logging.Handler):
    """Every record logged with an exception attached: a failure nothing named (a failed watch, a loop's
    unexpected error), unlike an error a component reports in words, which a broken peer may deserve."""

    def __init__(self, level: int = logging.WARNING):
        super().__init__(level)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.messages.append(record.getMessage())
