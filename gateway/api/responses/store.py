"""The in-memory store behind `previous_response_id` and `GET /v1/responses/{id}`.

A bounded LRU (oldest entry evicted past `capacity`): it keeps, per response id, the Response
object as returned and the conversation it ended (the input messages, instructions excluded,
plus the assistant turn it produced), so a follow-up request sends only its new items. It
lives in the gateway process: a restart forgets it, a worker restart or swap does not.
Message dicts are shared between entries, never mutated.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

DEFAULT_CAPACITY = 1024


@dataclass(slots=True)
class StoredResponse:
    response: dict[str, Any]
    conversation: list[dict[str, Any]]


class ResponseStore:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, response_id: str, stored: StoredResponse) -> None:
        self._entries[response_id] = stored
        self._entries.move_to_end(response_id)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def get(self, response_id: str) -> StoredResponse | None:
        stored = self._entries.get(response_id)
        if stored is not None:
            self._entries.move_to_end(response_id)
        return stored

    def delete(self, response_id: str) -> bool:
        return self._entries.pop(response_id, None) is not None
