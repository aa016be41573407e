"""What the conformance tests of workers share: one ``jobq serve`` per test module. Every run
of the kit works in a fresh queue of its own (``conformance-<hex>``) and deletes it at the end,
so runs do not see each other's jobs, and a module need not pay for a server per run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.kit import live_service
from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def kit_server(admin_url: str, template_db: str) -> Iterator[LiveServer]:
    with live_service(admin_url, template_db) as server:
        yield server
