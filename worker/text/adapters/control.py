"""The load_adapter / unload_adapter control calls, as the MLX thread applies them: on the
engine that serves adapters (a text engine), answered with the adapters loaded after it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from protocol.messages import ControlReply
from protocol.ready import Adapter
from worker.runtime.errors import internal
from worker.runtime.handoff import AdapterChange
from worker.text.adapters.files import AdapterError

log = logging.getLogger(__name__)


def change_adapter(engines: Sequence[Any], change: AdapterChange, grouped: bool) -> ControlReply:
    """Applies `change`; `grouped`: the worker is a distributed group, whose other ranks would
    not see it (refused)."""
    engine = next((e for e in engines if getattr(e, "adapters", None) is not None), None)
    if engine is None or grouped:
        why = "a distributed group" if grouped else "this model"
        return ControlReply(change.call_id, False, f"{why} serves no LoRA adapters")
    adapters = engine.adapters
    try:
        if change.path is not None:
            adapters.load(change.name, change.path, change.replace)
        else:
            adapters.unload(change.name)
        adapters.collect(engine.adapter_slots())
    except AdapterError as exc:
        return ControlReply(change.call_id, False, str(exc))
    except KeyError:
        return ControlReply(change.call_id, False, f"no adapter named {change.name!r} is loaded")
    except Exception as exc:
        log.exception("changing the adapter %s failed", change.name)
        return ControlReply(change.call_id, False, internal(exc).message)
    return ControlReply(change.call_id, True, adapters=loaded(adapters))


def loaded(adapters: Any) -> list[Adapter]:
    return [Adapter(name, path) for name, path in adapters.loaded()]
