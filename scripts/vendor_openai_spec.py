"""Cut the official OpenAI OpenAPI document down to the operations this server serves.

    python -m scripts.vendor_openai_spec path/to/openai-openapi/openapi.json [--commit SHA]

Reads the whole document (openai/openai-openapi, `openapi.json` or `openapi.yaml`), keeps the
served paths and methods and every component they reach through `$ref`, drops `x-oaiMeta`
(documentation examples, most of the bytes), and writes `tests/data/openai-openapi/
openapi.served.json` with a `x-vendored` note of the source commit. The tests validate the
server's requests and responses against that file; re-running this on a newer document and
reading the diff shows what the API changed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "openai-openapi"

# The OpenAI paths (without /v1) and methods the gateway serves under /v1.
SERVED: dict[str, tuple[str, ...]] = {
    "/chat/completions": ("post",),
    "/completions": ("post",),
    "/responses": ("post",),
    "/responses/{response_id}": ("get", "delete"),
    "/audio/speech": ("post",),
    "/audio/transcriptions": ("post",),
    "/audio/translations": ("post",),
    "/embeddings": ("post",),
    "/images/generations": ("post",),
    "/images/edits": ("post",),
    "/videos": ("post", "get"),
    "/videos/{video_id}": ("get", "delete"),
    "/videos/{video_id}/content": ("get",),
    "/models": ("get",),
    "/models/{model}": ("get",),
}
_METHODS = {"get", "post", "put", "patch", "delete"}


def _load(path: Path) -> dict[str, Any]:
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_load(path.read_text())
    return json.loads(path.read_text())


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "x-oaiMeta"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value)
            else:
                _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def served_subset(spec: dict[str, Any], commit: str | None = None) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, methods in SERVED.items():
        item = spec["paths"][path]
        kept = {k: v for k, v in item.items() if k not in _METHODS}  # path-level parameters
        kept.update({m: item[m] for m in methods})
        paths[path] = kept
    paths = _strip(paths)
    components: dict[str, dict[str, Any]] = {}
    todo: set[str] = set()
    _refs(paths, todo)
    done: set[str] = set()
    while todo:
        ref = todo.pop()
        done.add(ref)
        _, section, name = ref.removeprefix("#/").split("/")
        node = _strip(spec["components"][section][name])
        components.setdefault(section, {})[name] = node
        found: set[str] = set()
        _refs(node, found)
        todo |= found - done
    components["securitySchemes"] = spec["components"].get("securitySchemes", {})
    return {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "x-vendored": {
            "source": "https://github.com/openai/openai-openapi (openapi.json)",
            "commit": commit,
            "kept": {path: list(methods) for path, methods in SERVED.items()},
        },
        "servers": [{"url": "/v1"}],
        "security": spec.get("security", []),
        "paths": paths,
        "components": {k: dict(sorted(v.items())) for k, v in sorted(components.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the whole openapi.json or openapi.yaml")
    parser.add_argument("--commit", help="the openai-openapi commit it came from")
    parser.add_argument("--out", type=Path, default=OUT / "openapi.served.json")
    args = parser.parse_args()
    subset = served_subset(_load(args.source), args.commit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(subset, indent=1, ensure_ascii=False) + "\n")
    n = sum(len(v) for v in subset["components"].values())
    print(f"wrote {args.out}: {len(subset['paths'])} paths, {n} components")


if __name__ == "__main__":
    main()
