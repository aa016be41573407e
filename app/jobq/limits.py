"""The HTTP contract's numeric limits, shared by the server and the SDK.

One place for the numbers both sides must agree on: the service refuses a request past them
(``jobq.api.schemas``, through ``jobq.domain.jobs``) and the worker runner checks its own
settings against them before sending anything (``jobq.worker``). Standard library only and
importing nothing of jobq, so the SDK can use it without the server's modules.
"""

from typing import Final

MAX_BATCH: Final = 1000
"""Most jobs in one ``POST /v1/jobs/batch``, leases in one claim, acks in one ``POST /v1/leases/ack``."""

MAX_WAIT_MS: Final = 30_000
"""Longest long-poll a claim may ask for (``wait_ms``)."""
