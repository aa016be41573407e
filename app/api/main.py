"""The uvicorn entry point (``app.api.main:app``, a factory): settings from the environment."""

from __future__ import annotations

from fastapi import FastAPI

from app.api.app import create_app
from app.settings import Settings


def app() -> FastAPI:
    from app.logs import configure

    settings = Settings()
    configure(settings.log_format, settings.log_level)
    return create_app(settings)
