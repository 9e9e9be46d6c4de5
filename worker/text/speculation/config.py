"""Which speculation a worker runs (`--speculative`), and what makes it refuse at start.

`auto`, the default, is prompt lookup (`ngram`), or the draft model when `--draft-model` is
given, and quietly nothing where speculation cannot run: the batch-1 path of `--kv-bits` /
`--max-kv-size` (mlx-lm's own speculative generator serves a draft model there, as before), a
distributed group, or a model whose cache cannot be rewound. Asked for by name (`ngram`,
`draft`), the same cases are refused at start with the reason; `none` turns it off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

METHODS = ("auto", "ngram", "draft", "none")
MAX_DRAFT_TOKENS = 16  # proposals per sequence and step: a verification pass of 17 positions
# --num-draft-tokens unset, by method. Prompt lookup on Qwen2.5-Coder-0.5B rewriting a file
# (docs/benchmarks.md, "Speculative decoding"): 3 -> 10.6 tok/s, 5 -> 14.1, 8 -> 13.5,
# 12 -> 13.0, 16 -> 12.9. A draft model: mlx-lm's own default.
DRAFT_TOKENS = {"ngram": 5, "draft": 3}


class SpeculationError(ValueError):
    """Speculation was asked for where it cannot run; the message says why."""


@dataclass(frozen=True)
class Speculation:
    """What the batch engine runs: `method` is "ngram", "draft" or "none"."""

    method: str = "none"
    num_draft_tokens: int = 3
    lookup_min: int = 2
    lookup_max: int = 8

    @property
    def enabled(self) -> bool:
        return self.method != "none"


def check_draft_tokens(num_draft_tokens: int | None) -> str | None:
    """The complaint about a --num-draft-tokens value (None: fine; unset is by method)."""
    if num_draft_tokens is not None and not 1 <= num_draft_tokens <= MAX_DRAFT_TOKENS:
        return (
            f"--num-draft-tokens must be between 1 and {MAX_DRAFT_TOKENS}, got {num_draft_tokens}"
        )
    return None


def check_lookup_sizes(lookup_min: int, lookup_max: int) -> str | None:
    """The complaint about --prompt-lookup-min / --prompt-lookup-max (None: fine)."""
    if not 1 <= lookup_min <= lookup_max <= 8:
        return (
            "--prompt-lookup-min and --prompt-lookup-max must satisfy 1 <= min <= max <= 8, "
            f"got {lookup_min} and {lookup_max}"
        )
    return None


def resolve(
    asked: str,
    *,
    has_draft: bool,
    batch_path_blocker: str | None,
    distributed: bool,
    cache_problem: str | None,
    num_draft_tokens: int | None,
    lookup_min: int = 2,
    lookup_max: int = 8,
) -> Speculation:
    """The speculation to run for `--speculative asked` (SpeculationError when it cannot).

    `batch_path_blocker` is what sends generation to the batch-1 path (None: batching);
    `cache_problem` why the model's (or draft's) cache cannot be rewound (None: it can)."""
    if asked not in METHODS:
        raise SpeculationError(f"--speculative must be one of {', '.join(METHODS)}, got {asked!r}")
    for complaint in (
        check_draft_tokens(num_draft_tokens),
        check_lookup_sizes(lookup_min, lookup_max),
    ):
        if complaint:
            raise SpeculationError(complaint)
    if asked == "none":
        if has_draft:
            raise SpeculationError(
                "--draft-model is speculative decoding: not with --speculative none"
            )
        return Speculation()
    method = asked if asked != "auto" else ("draft" if has_draft else "ngram")
    if method == "draft" and not has_draft:
        raise SpeculationError("--speculative draft needs --draft-model")
    if method == "ngram" and has_draft:
        raise SpeculationError(
            "--draft-model proposes the tokens: use --speculative draft (or auto)"
        )
    blocker = _blocker(batch_path_blocker, distributed, cache_problem)
    if blocker is not None:
        if asked == "auto":
            return Speculation()
        raise SpeculationError(f"--speculative {asked} cannot run with {blocker}")
    tokens = num_draft_tokens if num_draft_tokens is not None else DRAFT_TOKENS[method]
    return Speculation(method, tokens, lookup_min, lookup_max)


def _blocker(
    batch_path_blocker: str | None, distributed: bool, cache_problem: str | None
) -> str | None:
    if batch_path_blocker is not None:
        return f"{batch_path_blocker}, which runs on the batch-1 path"
    if distributed:
        return "a distributed group (its ranks verify in lockstep only without it)"
    if cache_problem is not None:
        return f"this model: {cache_problem}"
    return None


def cache_problem(*models: Any) -> str | None:
    """Why one of these models' caches cannot be rewound per sequence (None: all can)."""
    from mlx_lm.models.cache import make_prompt_cache

    from worker.text.speculation.kv_rewind import rewindable

    for model in models:
        if model is None:
            continue
        problem = rewindable(make_prompt_cache(model))
        if problem is not None:
            return problem
    return None
