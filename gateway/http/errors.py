"""API errors: one exception type for every HTTP error the gateway answers with.

Every error leaves the gateway in the shape of the API it was asked through: OpenAI's
`{"error": {"message", "type", "param", "code"}}`, or, under `/v1/messages`, Anthropic's
`{"type": "error", "error": {"type", "message"}}` (its `type` derived from the status). Before
a response started it is the HTTP body; once a stream is under way it is that API's error
event (see each stream encoder). Engine exceptions and worker error codes are mapped here, so
the whole status-code policy is in one place.

What an error says is for anyone: a short reason naming the problem and a code, never a
traceback, a file path or another request's content (those go to the log). Every error names
its request id (gateway/http/request_id.py): Anthropic bodies in `request_id`, as Anthropic's API
does; OpenAI bodies, whose schema has no such field, in the message of a 5xx, the errors a
client would report; both in the `x-request-id` header.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.http.disconnect import ClientDisconnected
from gateway.http.request_id import HEADER, REQUEST_ID, request_id_of
from gateway.workers.errors import EngineUnavailable, QueueFull
from protocol.messages import Delta, ErrorCode, ErrorInfo, FinishReason

INVALID_REQUEST = "invalid_request_error"
AUTHENTICATION = "authentication_error"
PERMISSION = "permission_error"
SERVER_ERROR = "server_error"


class APIError(Exception):
    """An error the client sees, with everything the OpenAI error JSON carries."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID_REQUEST,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        anthropic_message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.anthropic_message = anthropic_message or message  # where Anthropic words it otherwise
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        message = self.message
        request_id = REQUEST_ID.get()
        if self.status >= 500 and request_id:
            message = f"{message} (request id {request_id})"
        return {
            "error": {
                "message": message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def anthropic_body(self) -> dict[str, Any]:
        kind = _ANTHROPIC_TYPES.get(self.status, "api_error" if self.status >= 500 else None)
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": kind or INVALID_REQUEST, "message": self.anthropic_message},
        }
        request_id = REQUEST_ID.get()
        if request_id:
            body["request_id"] = request_id
        return body

    def response(self, path: str = "") -> JSONResponse:
        """The HTTP error response, in the shape of the API `path` belongs to."""
        body = self.anthropic_body() if is_anthropic_path(path) else self.body()
        return JSONResponse(body, status_code=self.status, headers=self.headers)


ANTHROPIC_PREFIX = "/v1/messages"
_ANTHROPIC_TYPES = {
    400: INVALID_REQUEST,
    401: AUTHENTICATION,
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


def is_anthropic_path(path: str) -> bool:
    return path == ANTHROPIC_PREFIX or path.startswith(ANTHROPIC_PREFIX + "/")


def invalid(param: str | None, message: str, code: str | None = None) -> APIError:
    """400 for a malformed or out-of-range field; `param` names it as a JSON path."""
    return APIError(400, message, param=param, code=code)


def unsupported(param: str, what: str | None = None) -> APIError:
    """400 for an OpenAI field this server does not implement (yet): never silently ignored."""
    detail = f" ({what})" if what else ""
    return APIError(
        400,
        f"`{param}`{detail} is not supported by this server",
        param=param,
        code="unsupported_parameter",
    )


def unknown_field(param: str) -> APIError:
    return APIError(
        400,
        f"Unknown field `{param}`: unrecognized request argument",
        param=param,
        code="unknown_parameter",
    )


def engine_unavailable(exc: EngineUnavailable) -> APIError:
    """503 with Retry-After (whole seconds, as the header requires) when the engine says when."""
    headers = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    code = "queue_full" if isinstance(exc, QueueFull) else "engine_unavailable"
    return APIError(
        503,
        f"The server cannot take this request now: {exc.reason}",
        type=SERVER_ERROR,
        code=code,
        headers=headers,
    )


# Worker error codes -> HTTP status; anything not listed is a 500.
_STATUS_BY_CODE = {
    ErrorCode.BAD_REQUEST: 400,
    ErrorCode.CONTEXT_LENGTH: 400,
    ErrorCode.SWAP: 503,
    ErrorCode.DEADLINE: 504,
}


# A worker that died comes back by itself (a restart takes a few seconds): retry after this.
WORKER_DIED_RETRY_AFTER = 2


def worker_error(info: ErrorInfo | None) -> APIError:
    """The error a terminal `finish_reason="error"` delta stands for. A request whose worker
    died before it was answered is a 503 with Retry-After: nothing reached the client, so it is
    safe to send again, and the supervisor is already starting a new worker."""
    if info is None:
        return APIError(500, "The worker failed this request", type=SERVER_ERROR, code="internal")
    if info.code == ErrorCode.CONTEXT_LENGTH:
        return context_length(info)
    if info.code == ErrorCode.WORKER_DIED:
        return APIError(
            503,
            f"The worker serving this request went away ({info.message}); it is being "
            "restarted: send the request again",
            type=SERVER_ERROR,
            code=info.code,
            headers={"Retry-After": str(WORKER_DIED_RETRY_AFTER)},
        )
    status = _STATUS_BY_CODE.get(info.code, 500)
    return APIError(
        status,
        info.message,
        type=INVALID_REQUEST if status == 400 else SERVER_ERROR,
        code=info.code,
    )


def context_length(info: ErrorInfo) -> APIError:
    """A prompt too long for the model, in the words each API's clients react to: OpenAI's
    `context_length_exceeded`, Anthropic's `prompt is too long: N tokens > M maximum` (the text
    Claude Code compacts its history on)."""
    n, longest = info.prompt_tokens, info.max_prompt_tokens
    openai = (
        f"This model's maximum context length is {longest + 1} tokens. However, your messages "
        f"resulted in {n} tokens. Please reduce the length of the messages."
        if n is not None and longest is not None
        else info.message
    )
    return APIError(
        400, openai, param="messages", code=ErrorCode.CONTEXT_LENGTH, anthropic_message=info.message
    )


def aborted() -> APIError:
    """A terminal "abort" reaching a client that is still connected: a swap or a shutdown."""
    return APIError(
        503,
        "The request was aborted by the server (model swap or shutdown)",
        type=SERVER_ERROR,
        code="aborted",
    )


_NORMAL_ENDS = (FinishReason.STOP, FinishReason.LENGTH, FinishReason.TOOL_CALLS)


def terminal_error(delta: Delta) -> APIError | None:
    """The client-facing error a terminal delta stands for; None for a normal end."""
    if delta.finish_reason in _NORMAL_ENDS:
        return None
    if delta.finish_reason == FinishReason.ABORT:
        return aborted()
    return worker_error(delta.error)


def no_terminal(what: str = "request") -> APIError:
    """A request whose deltas stopped before its terminal one (never expected)."""
    return APIError(500, f"The {what} ended without a result", type=SERVER_ERROR, code="internal")


def as_api_error(exc: BaseException, log: Any, what: str) -> APIError:
    """Any exception raised while a response is produced, as the error the client gets."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, EngineUnavailable):
        return engine_unavailable(exc)
    log.error("%s failed mid-stream (request id %s)", what, REQUEST_ID.get(), exc_info=exc)
    return APIError(500, "Internal server error", type=SERVER_ERROR, code="internal")


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return exc.response(request.url.path)


async def _engine_unavailable(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, EngineUnavailable)
    return engine_unavailable(exc).response(request.url.path)


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (unknown route) / 405, in the OpenAI shape."""
    assert isinstance(exc, HTTPException)
    error = APIError(
        exc.status_code,
        str(exc.detail),
        type=INVALID_REQUEST if exc.status_code < 500 else SERVER_ERROR,
        headers=dict(exc.headers or {}),
    )
    return error.response(request.url.path)


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Starlette's ServerErrorMiddleware re-raises after this, so the server logs the traceback.
    # It runs outside every other middleware: the request id comes from the scope.
    request_id = request_id_of(request.scope)
    error = APIError(
        500,
        "Internal server error",
        type=SERVER_ERROR,
        code="internal",
        headers={HEADER.decode(): request_id} if request_id else None,
    )
    token = REQUEST_ID.set(request_id)
    try:
        return error.response(request.url.path)
    finally:
        REQUEST_ID.reset(token)


async def _client_gone(request: Request, exc: Exception) -> Response:
    # Nobody reads this: the work was already cancelled and its Abort sent. 499 is nginx's
    # "client closed request", which keeps access logs honest.
    return Response(status_code=499)


EXCEPTION_HANDLERS = {
    ClientDisconnected: _client_gone,
    APIError: _api_error,
    EngineUnavailable: _engine_unavailable,
    HTTPException: _http_exception,
    Exception: _unexpected,
}
