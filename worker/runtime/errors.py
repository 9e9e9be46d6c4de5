"""The worker's error policy in one type: a failure that ends one request, not the worker.

Anything raised while serving a request that is not a `RequestError` is reported to that
request as `internal`; anything raised outside a request ends the worker with a Fatal message.
What a client is told of an internal failure is its kind alone: the exception's text can hold
file paths or another request's content, so it goes to the worker's log with the traceback,
never into an ErrorInfo.
"""

from __future__ import annotations

from protocol.messages import ErrorCode, ErrorInfo


class RequestError(Exception):
    """Ends one request with finish_reason "error" and this code/message; the worker goes on."""

    def __init__(
        self,
        message: str,
        code: ErrorCode = ErrorCode.BAD_REQUEST,
        prompt_tokens: int | None = None,
        max_prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.prompt_tokens = prompt_tokens
        self.max_prompt_tokens = max_prompt_tokens

    def info(self) -> ErrorInfo:
        return ErrorInfo(self.code, self.message, self.prompt_tokens, self.max_prompt_tokens)


def bad_request(message: str) -> RequestError:
    """Input the client can fix; the message names the problem."""
    return RequestError(message, ErrorCode.BAD_REQUEST)


def context_length(prompt_tokens: int, context: int) -> RequestError:
    """A prompt that leaves the model no room to generate (a prompt of `context - 1` tokens at
    most leaves one)."""
    longest = context - 1
    message = f"prompt is too long: {prompt_tokens} tokens > {longest} maximum"
    return RequestError(message, ErrorCode.CONTEXT_LENGTH, prompt_tokens, longest)


def internal(exc: BaseException) -> ErrorInfo:
    """The ErrorInfo of a request that failed inside the worker; log the exception first."""
    return ErrorInfo(ErrorCode.INTERNAL, f"the worker failed this request ({type(exc).__name__})")
