"""The error bodies' schemas every API shares: OpenAI's `{"error": {...}}` and Anthropic's
`{"type": "error", ...}` (the shapes gateway/http/errors.py writes), for /openapi.json."""

from __future__ import annotations

from gateway.schema.builders import STRING, Schema, _all, _const, _doc, _enum, _or_null

ANTHROPIC_ERROR_TYPES = (
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "overloaded_error",
    "timeout_error",
    "api_error",
)

OPENAI_ERROR = _all(
    {
        "message": _doc(STRING, "What is wrong; a 5xx names the request id."),
        "type": _doc(
            STRING,
            "`invalid_request_error` (4xx), `authentication_error` (401) or `server_error` (5xx).",
        ),
        "param": _doc(_or_null(STRING), "The request field at fault, as a JSON path, if one is."),
        "code": _doc(
            _or_null(STRING),
            "A machine-readable code: `unknown_parameter`, `unsupported_parameter`, "
            "`model_not_found`, `context_length_exceeded`, `request_too_large`, "
            "`invalid_api_key`, `queue_full`, `engine_unavailable`, ...",
        ),
    }
)

SCHEMAS: dict[str, Schema] = {
    "ErrorResponse": _all({"error": OPENAI_ERROR}, "An OpenAI-shaped error."),
    "AnthropicErrorResponse": _all(
        {
            "type": _const("error"),
            "error": _all(
                {
                    "type": _enum(*ANTHROPIC_ERROR_TYPES, doc="The kind, from the HTTP status."),
                    "message": STRING,
                }
            ),
            "request_id": _doc(STRING, "The request's id, as in the `x-request-id` header."),
        },
        "An Anthropic-shaped error (every error under /v1/messages).",
    ),
}
