"""Logging: one line per record, JSON (``JOBQ_LOG_FORMAT=json``) or text.

A lifecycle event of many jobs at once (a batch enqueue, a claim of 100, a batch ack) is one
record carrying ``jobs``, a list of per-job fields, and the formatters write one line per job.
One record per job cost more CPU than the batch operation it described (logging builds a
``LogRecord``, takes a lock and writes, per record): about a third of the service's time in a
batch drain. Handlers of other formatters see the record with its ``jobs`` attribute.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

# Fields the lifecycle events attach per job; copied into the line when present.
EVENT_FIELDS = ("event", "job_id", "queue", "type", "worker_id", "attempt", "duration_ms")


def _jobs(record: logging.LogRecord) -> list[Mapping[str, Any]]:
    jobs = getattr(record, "jobs", None)
    if jobs is None:
        return [{name: getattr(record, name) for name in EVENT_FIELDS if getattr(record, name, None) is not None}]
    event = getattr(record, "event", None)
    return [{"event": event, **job} if event is not None else job for job in jobs]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        head: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat().replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            head["exc"] = self.formatException(record.exc_info)
        lines = []
        for job in _jobs(record):
            line = dict(head)
            line.update((k, v) for k, v in job.items() if v is not None)
            lines.append(orjson.dumps(line, default=str).decode())
        return "\n".join(lines)


class TextFormatter(logging.Formatter):
    _second: int | None = None
    _second_text = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        # The logging module's own text, its date part made once a second, not per record.
        second = int(record.created)
        if second != self._second or datefmt:
            text = time.strftime(datefmt or self.default_time_format, self.converter(second))
            if datefmt:
                return text
            self._second, self._second_text = second, text
        return self.default_msec_format % (self._second_text, record.msecs)

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        lines = []
        for job in _jobs(record):
            fields = " ".join(f"{n}={job[n]}" for n in EVENT_FIELDS[1:] if job.get(n) is not None)
            lines.append(f"{base} {fields}" if fields else base)
        return "\n".join(lines)


def configure(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # No format of ours names a record's thread or process: a record skips looking them up.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger("jobq")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
