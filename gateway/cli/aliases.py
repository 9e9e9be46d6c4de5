"""`serve --model-alias PATTERN` and `--voice-alias NAME=VOICE`: other names clients may send.

`--model-alias` (repeatable) is an fnmatch glob (`claude-*`, `gpt-4o*`, `*`): a request whose
`model` matches reaches the main model (gateway/workers/served_models.py). `--voice-alias`
(repeatable) maps a voice name to one of the TTS model's presets, over the default table of
OpenAI's voice names (gateway/audio/speech/voice_aliases.py). Their syntax is checked here;
whether VOICE is one of the model's voices is known only once the worker is ready, so a wrong
VOICE is a 400 on the requests that use NAME.
"""

from __future__ import annotations

from typing import Any

import click


def _model_aliases(ctx: Any, param: Any, values: tuple[str, ...]) -> tuple[str, ...]:
    for pattern in values:
        if not pattern.strip():
            raise click.BadParameter("a pattern may not be empty (e.g. 'claude-*')")
    return tuple(dict.fromkeys(values))


def _voice_aliases(ctx: Any, param: Any, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs: dict[str, tuple[str, str]] = {}
    for value in values:
        name, sep, voice = (part.strip() for part in value.partition("="))
        if not sep or not name or not voice:
            raise click.BadParameter(f"{value!r} is not NAME=VOICE (e.g. alloy=vivian)")
        if name.casefold() in pairs:
            raise click.BadParameter(f"the voice name {name!r} is given more than once")
        pairs[name.casefold()] = (name, voice)
    return tuple(pairs.values())


def alias_options(command: Any) -> Any:
    command = click.option(
        "--voice-alias",
        "voice_aliases",
        multiple=True,
        metavar="NAME=VOICE",
        callback=_voice_aliases,
        help="Voice NAME (e.g. OpenAI's alloy) speaks as the TTS model's VOICE (repeatable).",
    )(command)
    return click.option(
        "--model-alias",
        "model_aliases",
        multiple=True,
        metavar="PATTERN",
        callback=_model_aliases,
        help="Model names matching this glob (e.g. 'claude-*') reach MODEL (repeatable).",
    )(command)


def alias_config(options: dict[str, Any]) -> dict[str, Any]:
    """ServerConfig's alias fields from the alias flags."""
    return {"model_aliases": options["model_aliases"], "voice_aliases": options["voice_aliases"]}
