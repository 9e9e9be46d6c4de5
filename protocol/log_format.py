"""The log formats both processes write to stderr: `text` (one line for a person) or `json`
(one JSON object a line, for a log shipper), so the gateway's and its worker's lines read alike.

A record about one request carries its id (`record.request_id`, set through `extra=` or by a
filter): text lines end with `[request_id]`, JSON objects have a `request_id` key. The gateway
forwards each line its worker writes; in JSON a forwarded worker object is written as it came
(`record.forwarded`), not wrapped in another object.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable

LOG_FORMATS = ("text", "json")


class TextFormatter(logging.Formatter):
    def __init__(self, process: str) -> None:
        super().__init__(f"%(asctime)s {process}[%(process)d] %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        request_id = getattr(record, "request_id", None)
        return f"{line} [{request_id}]" if request_id else line


class JsonFormatter(logging.Formatter):
    def __init__(self, process: str) -> None:
        super().__init__()
        self._process = process

    def format(self, record: logging.LogRecord) -> str:
        forwarded = getattr(record, "forwarded", None)
        if isinstance(forwarded, dict):
            return json.dumps(forwarded, ensure_ascii=False)
        entry = {
            "time": _utc(record.created),
            "level": record.levelname.lower(),
            "process": self._process,
            "pid": record.process,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def _utc(created: float) -> str:
    millis = int(created * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{millis:03d}Z"


def configure_logging(
    level: str, log_format: str, process: str, filters: Iterable[logging.Filter] = ()
) -> None:
    """The root logger writes `log_format` lines to stderr at `level`, replacing any handler."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, got {log_format!r}")
    handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter(process) if log_format == "json" else TextFormatter(process)
    handler.setFormatter(formatter)
    for log_filter in filters:
        handler.addFilter(log_filter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
