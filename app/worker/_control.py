"""Exceptions a handler raises to steer what happens to its job."""

from __future__ import annotations


class Retry(Exception):
    """Fail this attempt on purpose and run the job again.

    ``in_ms`` sets the delay before the retry (``retry_in_ms``); None leaves it to the
    queue's backoff. The attempt still counts towards ``max_attempts``.
    """

    def __init__(
        self, reason: str = "retry requested by the handler", *, in_ms: int | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.in_ms = in_ms


class Discard(Exception):
    """Give up on the job: it goes ``dead`` at once (fail with ``retry: false``)."""

    def __init__(self, reason: str = "discarded by the handler") -> None:
        super().__init__(reason)
        self.reason = reason
