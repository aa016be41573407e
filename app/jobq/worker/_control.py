"""Exceptions a handler raises to steer what happens to its job."""

from __future__ import annotations


class Retry(Exception):
    """Fail this attempt on purpose and run the job again.

    ``in_ms`` sets the delay before the retry (``retry_in_ms``); None leaves it to the
    queue's backoff. The attempt still counts towards ``max_attempts``.
    """

    def __init__(
        self, reason: str = "retry requested by the handler", *, in_ms: float | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        # Whole milliseconds: the service takes no coercion, and 1500.0 is not an integer
        # there (a delay computed as seconds * 1000 easily is a float).
        self.in_ms = None if in_ms is None else round(in_ms)


class Discard(Exception):
    """Give up on the job: it goes ``dead`` at once (fail with ``retry: false``)."""

    def __init__(self, reason: str = "discarded by the handler") -> None:
        super().__init__(reason)
        self.reason = reason
