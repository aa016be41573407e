"""The uvicorn entry point (``jobq.api.main:app``, a factory): settings from the environment."""

from __future__ import annotations

from fastapi import FastAPI

from jobq.api.app import create_app
from jobq.settings import Settings


def app() -> FastAPI:
    from jobq.logs import configure

    settings = Settings()
    configure(settings.log_format, settings.log_level)
    return create_app(settings)
