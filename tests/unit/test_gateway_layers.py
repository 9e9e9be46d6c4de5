"""The gateway's layers, checked on the source (docs/architecture.md, "Where does X live").

- One package per API under `gateway/api/`: a module of one never imports another API's
  package (`gateway.api.chat_completions` never imports `gateway.api.speech`).
- What lies below the APIs (`generation`, `schema`, `audio`, `media`, `engine`, `http`, ...)
  imports no API's package; only `gateway/app.py` (it joins their `ROUTES`) and the OpenAPI
  document's assembly (`gateway/openapi/document.py`, `schemas.py`: their field tables and
  response schemas) may.
- No import cycle between the gateway's packages (each API's package counts as one: `api.x`),
  nor between its modules.
Every `import` statement counts, wherever it stands (a lazy import inside a function too).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The modules outside gateway/api/ that gather the APIs.
GATHER_APIS = {"gateway.app", "gateway.openapi.document", "gateway.openapi.schemas"}


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


MODULES = {_module_name(path): path for path in sorted((ROOT / "gateway").rglob("*.py"))}


def imported(source: str) -> list[tuple[int, str]]:
    """(line, name) of every absolute import: `import a.b` gives a.b; `from a.b import c`
    gives a.b and a.b.c (c may be a module)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def api_of(module: str) -> str | None:
    """The API package a gateway module is in or names (`gateway.api.speech.form` -> speech);
    None outside gateway/api/ (and for `gateway.api` itself)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["gateway", "api"] and len(parts) > 2 else None


def layer_offences(module: str, source: str) -> list[str]:
    """What `module`'s imports break of the API rules (one line each)."""
    own = api_of(module)
    offences: dict[tuple[int, str], str] = {}  # one per statement and API
    for line, name in imported(source):
        other = api_of(name)
        if other is None or other == own:
            continue
        if own is not None:
            what = "another API's package"
        elif module not in GATHER_APIS:
            what = "an API's package from below"
        else:
            continue
        offences[line, other] = f"{module}:{line} imports {what}: gateway.api.{other}"
    return list(offences.values())


def package_of(module: str) -> str:
    """A gateway module's package: `gateway.http.sse` -> http, `gateway.api.speech.form` ->
    api.speech, `gateway.app` -> app."""
    api = api_of(module)
    if api is not None:
        return f"api.{api}"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _module_graph() -> dict[str, set[str]]:
    return {
        module: {name for _, name in imported(path.read_text()) if name in MODULES} - {module}
        for module, path in MODULES.items()
    }


def test_an_api_imports_no_other_api_and_nothing_below_imports_one():
    assert [m for m in MODULES if api_of(m)], "no API packages found under gateway/api/"
    offences = [
        offence
        for module, path in MODULES.items()
        for offence in layer_offences(module, path.read_text())
    ]
    assert not offences, "\n".join(offences)


def test_no_import_cycle_between_gateway_packages():
    graph: dict[str, set[str]] = {}
    for module, targets in _module_graph().items():
        for target in targets:
            if package_of(module) != package_of(target):
                graph.setdefault(package_of(module), set()).add(package_of(target))
    found = cycles(graph)
    assert not found, f"packages importing each other: {found}"


def test_no_import_cycle_between_gateway_modules():
    found = cycles(_module_graph())
    assert not found, f"modules importing each other: {found}"


def test_the_checks_see_what_they_must():
    # The rules above pass on the tree; here each one fails on what it must catch.
    lazy = "def f():\n    from gateway.api.speech.served import x\n"
    assert layer_offences("gateway.api.chat_completions.chat", lazy) == [
        "gateway.api.chat_completions.chat:2 imports another API's package: gateway.api.speech"
    ]
    assert layer_offences("gateway.generation.output", "from gateway.api import speech\n") == [
        "gateway.generation.output:1 imports an API's package from below: gateway.api.speech"
    ]
    assert layer_offences("gateway.api.speech.form", "import gateway.api.speech.stream\n") == []
    assert layer_offences("gateway.app", "from gateway.api.speech import routes\n") == []
    assert package_of("gateway.api.speech.form") == "api.speech"
    assert package_of("gateway.http.sse") == "http"
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
