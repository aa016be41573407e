"""The OpenAPI document as committed under openapi/: rendered without a database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.api.app import create_app
from app.settings import Settings

DOCUMENT = Path(__file__).resolve().parent.parent.parent / "openapi" / "openapi.json"


def document() -> dict[str, Any]:
    # The pool opens lazily, in the lifespan, so no database is touched here.
    app = create_app(Settings(database_url="postgresql://openapi@127.0.0.1/none"))
    return app.openapi()


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"
