"""Where and how `serve` listens, and who may call it: `--uds`, `--ssl-keyfile` /
`--ssl-certfile`, `--allowed-origins` (CORS), and the API keys (`--api-key`, repeatable, and
`--api-key-file`).

A UNIX socket replaces the TCP port (host and port are then unused). TLS takes both files
(uvicorn's); the key file may be the PEM that also holds the certificate. CORS is off unless
origins are given: then those origins (or `*`) may call the API from a browser, and a preflight
is answered before the key check (a browser sends it without credentials). The playground is
served from the server's own origin and needs no CORS.

Several keys: any of them opens the API. A key is never logged: log lines name it by its id,
the first 8 hex digits of its SHA-256 (`printf %s KEY | sha256sum | cut -c1-8`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gateway.http.auth import key_id

MAX_KEYS = 1024


def listening_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.option(
                "--api-key",
                "api_keys",
                multiple=True,
                envvar="VOMLX_API_KEY",
                help="Require a key; repeat for several, any of which opens the API (env "
                "VOMLX_API_KEY: keys separated by spaces).",
            ),
            click.option(
                "--api-key-file",
                type=click.Path(exists=True, dir_okay=False),
                help="More keys, one per line (blank lines and lines starting with # skipped).",
            ),
            click.option(
                "--uds",
                type=click.Path(dir_okay=False),
                help="Listen on this UNIX socket instead of --host/--port.",
            ),
            click.option(
                "--ssl-keyfile",
                type=click.Path(exists=True, dir_okay=False),
                help="TLS: the private key (PEM); with --ssl-certfile.",
            ),
            click.option(
                "--ssl-certfile",
                type=click.Path(exists=True, dir_okay=False),
                help="TLS: the certificate chain (PEM); with --ssl-keyfile.",
            ),
            click.option(
                "--allowed-origins",
                help="CORS: comma-separated origins (e.g. https://app.example) or * that may "
                "call the API from a browser [default: none].",
            ),
        ]
    ):
        command = option(command)
    return command


def api_keys(options: dict[str, Any]) -> tuple[str, ...]:
    """The keys of --api-key and --api-key-file, checked, in order, without repeats."""
    keys = list(options["api_keys"] or ())
    if options["api_key_file"]:
        text = Path(options["api_key_file"]).read_text(encoding="utf-8")
        keys += [
            line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
        ]
    for key in keys:
        if not key.isprintable() or any(c.isspace() for c in key) or not key.isascii():
            raise click.BadParameter(
                f"an API key (id {key_id(key.encode())}) holds a space or a character outside printable "
                "ASCII: clients send keys in HTTP headers",
                param_hint="--api-key",
            )
    unique = tuple(dict.fromkeys(k for k in keys if k))
    if len(unique) > MAX_KEYS:
        raise click.BadParameter(f"at most {MAX_KEYS} keys", param_hint="--api-key")
    return unique


def allowed_origins(value: str | None) -> tuple[str, ...]:
    """--allowed-origins as a tuple; each an origin (scheme://host[:port]) or *."""
    if not value:
        return ()
    origins = tuple(o.strip().rstrip("/") for o in value.split(",") if o.strip())
    for origin in origins:
        scheme, sep, rest = origin.partition("://")
        if origin != "*" and (
            not sep or scheme not in ("http", "https") or not rest or "/" in rest
        ):
            raise click.BadParameter(
                f"{origin!r} is not an origin: scheme://host[:port], e.g. https://app.example",
                param_hint="--allowed-origins",
            )
    return origins


def tls_files(options: dict[str, Any]) -> tuple[str | None, str | None]:
    """(keyfile, certfile), both or neither."""
    keyfile, certfile = options["ssl_keyfile"], options["ssl_certfile"]
    if (keyfile is None) != (certfile is None):
        raise click.UsageError("TLS needs both --ssl-keyfile and --ssl-certfile")
    return keyfile, certfile


def unix_socket(options: dict[str, Any]) -> str | None:
    """--uds, checked: its directory exists, and nothing but a stale socket is in its place."""
    path = options["uds"]
    if path is None:
        return None
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise click.BadParameter(f"no directory {parent}", param_hint="--uds")
    if os.path.exists(path) and not _is_socket(path):
        raise click.BadParameter(f"{path} exists and is not a socket", param_hint="--uds")
    return os.path.abspath(path)


def _is_socket(path: str) -> bool:
    return stat.S_ISSOCK(os.stat(path).st_mode)


def address(host: str, port: int, uds: str | None, tls: bool) -> str:
    """Where the server listens, as the start-up line says it."""
    if uds is not None:
        return f"unix:{uds}" + (" (TLS)" if tls else "")
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"
