"""The OpenAPI document as committed under openapi/: rendered without a database."""

from __future__ import annotations

import json
from typing import Any

from jobq import bundled
from jobq.api.app import create_app
from jobq.settings import Settings

DOCUMENT = bundled.openapi() / "openapi.json"


def document() -> dict[str, Any]:
    # The pool opens lazily, in the lifespan, so no database is touched here.
    app = create_app(Settings(database_url="postgresql://openapi@127.0.0.1/none"))
    return app.openapi()


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"
