"""The uvicorn entry point (``jobq.api.main:app``, a factory): settings from the environment."""

from __future__ import annotations

import gc

from fastapi import FastAPI

from jobq.api.app import create_app
from jobq.settings import Settings

# Allocations (net) between two young-generation collections; Python's default is 700.
GC_YOUNG_THRESHOLD = 10_000


def app() -> FastAPI:
    from jobq.logs import configure

    settings = Settings()
    configure(settings.log_format, settings.log_level)
    built = create_app(settings)
    tune_gc()
    return built


def tune_gc() -> None:
    """Once per serving process, when everything it imports is loaded: what exists now lives
    as long as the process, so the cyclic collector stops walking it (``gc.freeze``), and
    young collections run less often. A batch request allocates thousands of containers;
    with Python's defaults, the collector walked the whole heap of FastAPI, pydantic and
    their modules every few requests, about a quarter of the service's CPU in batch mode."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
