"""What the conformance tests share: one ``jobq serve`` per test module. Every run of the kit
works in a fresh queue of its own (``conformance-<hex>``) and deletes it at the end, so runs
do not see each other's jobs, and a module need not pay for a server per run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import pg
from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def kit_server(admin_url: str, template_db: str) -> Iterator[LiveServer]:
    name = pg.clone(admin_url, template_db)
    server = LiveServer(pg.with_database(admin_url, name))
    try:
        server.start()
        yield server
    finally:
        server.stop()
        pg.drop(admin_url, name)
