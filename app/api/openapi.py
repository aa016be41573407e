"""The OpenAPI document as committed under openapi/: rendered without a database."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from jobq.api.app import create_app
from jobq.settings import Settings

# The repository's openapi/ folder ships as the package jobq.openapi (pyproject.toml).
DOCUMENT = Path(str(resources.files("jobq.openapi").joinpath("openapi.json")))


def document() -> dict[str, Any]:
    # The pool opens lazily, in the lifespan, so no database is touched here.
    app = create_app(Settings(database_url="postgresql://openapi@127.0.0.1/none"))
    return app.openapi()


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"
