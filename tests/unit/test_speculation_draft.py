"""A draft model inside continuous batching (worker/text/speculation/draft.py): each sequence's
greedy continuation from a draft cache of its own, verified like prompt lookup's proposals. With
the model as its own draft every greedy proposal is accepted; with a draft that disagrees, eight
mixed requests (greedy, seeded, logprobs, stops, penalties) equal their runs without
speculation; a draft cache cut back past rejected proposals proposes what a fresh one does."""

from __future__ import annotations

from dataclasses import replace

import mlx.core as mx
import pytest
from mlx.utils import tree_map

from worker.text.model import load_text_model
from worker.text.speculation.config import Speculation
from worker.text.speculation.draft import DraftProposer
from worker.tiny_models import ensure_checkpoint

from .test_speculation_engine import _verify_always, engine, mixed_submits, outputs  # noqa: F401
from .test_worker_batch_engine import PROMPTS, Run, solo, submit, text_model  # noqa: F401

DRAFT = Speculation("draft", num_draft_tokens=3)


@pytest.fixture(scope="module")
def own_draft(text_model):  # noqa: F811
    """The model as its own draft."""
    return replace(text_model, draft_model=text_model.model)


@pytest.fixture(scope="module")
def other_draft(text_model):  # noqa: F811
    """A draft that often disagrees: the same checkpoint, its weights perturbed."""
    draft = load_text_model(str(ensure_checkpoint("qwen3"))).model
    key = mx.random.key(5)
    draft.update(tree_map(lambda w: w * (1 + 0.02 * mx.random.normal(w.shape, key=key)).astype(w.dtype)
                          if mx.issubdtype(w.dtype, mx.floating) else w, draft.parameters()))  # fmt: skip
    return replace(text_model, draft_model=draft)


def test_the_model_as_its_own_draft_has_every_greedy_proposal_accepted(own_draft, solo):  # noqa: F811
    for name in ("fib", "cls"):
        run = Run(engine(own_draft, DRAFT))
        run.admit(submit(name, PROMPTS[name], 30))
        run.until_done()
        assert (run.tokens(name), run.text(name)) == solo(PROMPTS[name], 30), name
        totals = run.engine._speculator.totals
        assert totals.draft_tokens > 0
        assert totals.accepted_tokens == totals.draft_tokens, name
        assert run.steps <= 30 // 2


def test_eight_mixed_requests_with_a_disagreeing_draft_equal_their_runs_without_it(
    other_draft,
    text_model,  # noqa: F811
):
    submits = mixed_submits
    runs = []
    for model, speculation in ((text_model, None), (other_draft, DRAFT)):
        run = Run(engine(model, speculation))
        run.admit(*submits())
        run.until_done()
        runs.append(run)
    plain, spec = runs
    for s in submits():
        assert outputs(spec, s.request_id) == outputs(plain, s.request_id), s.request_id
    totals = spec.engine._speculator.totals
    assert 0 < totals.accepted_tokens < totals.draft_tokens  # some accepted, some rejected


def test_a_cut_back_draft_cache_proposes_what_a_fresh_one_does(other_draft):
    tokens = other_draft.tokenizer.encode(PROMPTS["fib"])
    used = DraftProposer(other_draft.draft_model)
    used.propose([1], [tokens[:-3]], [tokens[-3]], [4])  # its proposals are now in the cache
    rewound = used.propose([1], [tokens[:-1]], [tokens[-1]], [4])  # shares a shorter prefix
    fresh = DraftProposer(other_draft.draft_model).propose([1], [tokens[:-1]], [tokens[-1]], [4])
    assert rewound == fresh and len(fresh[0]) == 4
