"""Where a response stands relative to its reasoning block, token by token.

Constrained decoding applies to the answer, not to the thinking before it (a reasoning model
thinks in free text, then answers in the required shape), and a thinking budget counts only
thinking tokens. The gate follows the same rules as the text-side reasoning parser
(worker.text.parsers.reasoning): reasoning can open only with the very first token and closes at the
first end-marker token. Markers must be single tokens here; pure Python, no MLX.
"""

from __future__ import annotations

from collections.abc import Callable

from worker.text.parsers.harmony import header_route


class ThinkGate:
    """States: "maybe" (the first token may open reasoning), "inside", "after" (the answer)."""

    __slots__ = ("start_id", "end_id", "state", "thinking_tokens")

    def __init__(self, start_id: int, end_id: int, starts_inside: bool) -> None:
        self.start_id = start_id
        self.end_id = end_id
        self.state = "inside" if starts_inside else "maybe"
        self.thinking_tokens = 0

    @property
    def answering(self) -> bool:
        return self.state == "after"

    def advance(self, token: int) -> bool:
        """Moves past one generated token; True when the token belongs to the answer."""
        if self.state == "maybe":
            if token == self.start_id:
                self.state = "inside"
                return False
            self.state = "after"
            return True
        if self.state == "inside":
            if token == self.end_id:
                self.state = "after"
            else:
                self.thinking_tokens += 1
            return False
        return True


class HarmonyGate:
    """The same for harmony (GPT-OSS), where reasoning is the body of `analysis` messages.

    Harmony grammars include the analysis message (worker/text/parsers/harmony.py), so every
    token belongs to the grammar (`advance` is always True); the gate counts the tokens of
    analysis bodies, and past the thinking budget the processor allows only `<|end|>`
    (`end_id`) there: the model goes on to its next message. `decode` turns a header's token
    ids into text. States: "header", "inside" (an analysis body), "body" (any other body).
    """

    __slots__ = ("message_id", "end_id", "state", "thinking_tokens", "_decode", "_header")

    def __init__(self, message_id: int, end_id: int, decode: Callable[[list[int]], str]) -> None:
        self.message_id = message_id
        self.end_id = end_id
        self._decode = decode
        self._header: list[int] = []
        self.state = "header"
        self.thinking_tokens = 0

    @property
    def answering(self) -> bool:
        return self.state != "inside"

    def advance(self, token: int) -> bool:
        if self.state == "header":
            if token == self.message_id:
                route, _ = header_route(self._decode(self._header))
                self.state = "inside" if route == "reasoning" else "body"
                self._header = []
            else:
                self._header.append(token)
        elif token == self.end_id:
            self.state = "header"
        elif self.state == "inside":
            self.thinking_tokens += 1
        return True
