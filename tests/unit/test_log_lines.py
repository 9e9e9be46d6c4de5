"""Log lines: the text and JSON formats, request ids stamped on records, the access log."""

from __future__ import annotations

import json
import logging

from gateway.http.request_id import REQUEST_ID, RequestIdLogFilter
from protocol.log_format import JsonFormatter, TextFormatter
from tests.support.fake_engine import make_client


def _record(message: str = "hello %s", *args, **extra) -> logging.LogRecord:
    record = logging.LogRecord(
        "gateway.x", logging.INFO, __file__, 1, message, args or ("you",), None
    )
    record.__dict__.update(extra)
    return record


def test_json_lines_hold_time_level_process_logger_message_and_request_id():
    entry = json.loads(JsonFormatter("gateway").format(_record(request_id="r-1")))
    assert entry["message"] == "hello you" and entry["request_id"] == "r-1"
    assert entry["level"] == "info" and entry["process"] == "gateway"
    assert entry["logger"] == "gateway.x" and entry["time"].endswith("Z")


def test_a_forwarded_worker_object_is_written_as_it_came():
    worker_entry = {"process": "worker", "message": "hi", "request_id": "r-2"}
    line = JsonFormatter("gateway").format(_record(forwarded=worker_entry, request_id=""))
    assert json.loads(line) == worker_entry


def test_text_lines_end_with_the_request_id_when_there_is_one():
    formatter = TextFormatter("worker")
    assert formatter.format(_record(request_id="r-3")).endswith("gateway.x: hello you [r-3]")
    assert formatter.format(_record()).endswith("gateway.x: hello you")


def test_records_made_while_a_request_is_served_are_stamped_with_its_id():
    log_filter = RequestIdLogFilter()
    token = REQUEST_ID.set("req_abc")
    try:
        inside, own, none = _record(), _record(request_id="mine"), _record(request_id="")
        for record in (inside, own, none):
            log_filter.filter(record)
    finally:
        REQUEST_ID.reset(token)
    outside = _record()
    log_filter.filter(outside)
    assert (inside.request_id, own.request_id, none.request_id) == ("req_abc", "mine", "")
    assert not hasattr(outside, "request_id")


def test_the_access_log_has_one_line_per_request_and_leaves_out_health_polls(caplog):
    caplog.set_level(logging.INFO, logger="gateway.access")
    with make_client() as client:
        client.get("/health")
        client.get("/v1/models?x=1", headers={"x-request-id": "acc-1"})
        client.get("/v1/no-such-route")
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.access"]
    assert len(lines) == 2, lines
    assert '"GET /v1/models?x=1 HTTP/1.1" 200 ' in lines[0]
    assert '"GET /v1/no-such-route HTTP/1.1" 404 ' in lines[1]


def test_log_polls_puts_health_in_the_access_log(caplog):
    caplog.set_level(logging.INFO, logger="gateway.access")
    with make_client(log_polls=True) as client:
        client.get("/health")
    assert any("/health" in r.getMessage() for r in caplog.records if r.name == "gateway.access")


def test_worker_lines_about_a_request_name_its_http_request_while_it_runs(caplog):
    from protocol.inputs import CompleteInputs, SamplingParams
    from protocol.messages import Delta, Submit, Usage
    from worker.runtime.request_log import RequestLog, named

    caplog.set_level(logging.INFO, logger="worker.requests")
    requests = RequestLog(clock=iter([10.0, 10.5]).__next__)
    submit = Submit("w-1", CompleteInputs("x", SamplingParams(2)), False, http_request_id="h-1")
    requests.arrived(submit)
    assert named("w-1") == {"request_id": "h-1"}
    requests.ended(Delta("w-1", finish_reason="length", usage=Usage(3, 2)))
    assert named("w-1") == {"request_id": "w-1"}  # ended: its own id
    (record,) = [r for r in caplog.records if r.name == "worker.requests"]
    assert record.request_id == "h-1"
    assert record.getMessage() == "complete request finished (length) prompt=3 output=2 in 0.500s"
