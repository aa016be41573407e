"""jobq: a durable job queue over HTTP, on PostgreSQL.

    from jobq import Client, Worker, Retry, Discard

``pip install jobq`` is this SDK, the worker runner and the producer and operator commands;
``pip install 'jobq[server]'`` adds the service (``jobq serve``). The SDK names below are the
ones of ``jobq.client`` and ``jobq.worker``; the server's modules are never imported here.
"""

from importlib import metadata as _metadata

from jobq.client import *  # noqa: F403  (the SDK's __all__, pinned by tests/sdk/test_exported_members.py)
from jobq.client import __all__ as _client_all
from jobq.worker import *  # noqa: F403
from jobq.worker import __all__ as _worker_all

try:
    # pyproject.toml holds the one version; the installed metadata carries it here.
    __version__: str = _metadata.version("jobq")
except _metadata.PackageNotFoundError:  # imported from a tree that was never installed
    __version__ = "0+unknown"

__all__ = sorted({*_client_all, *_worker_all, "__version__"})
