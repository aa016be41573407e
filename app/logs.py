"""Logging: one line per record, JSON (``JOBQ_LOG_FORMAT=json``) or text."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

# Fields the lifecycle events attach with ``extra=``; copied into the JSON line when present.
EVENT_FIELDS = ("event", "job_id", "queue", "type", "worker_id", "attempt", "duration_ms")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat().replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in EVENT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        fields = " ".join(f"{n}={getattr(record, n)}" for n in EVENT_FIELDS[1:]
                          if getattr(record, n, None) is not None)
        return f"{base} {fields}" if fields else base


def configure(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("jobq")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
