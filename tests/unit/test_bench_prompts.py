"""Prompts of a requested token count built without a tokenizer (gateway.cli.bench.prompts)."""

from __future__ import annotations

import pytest

from gateway.cli.bench.prompts import Calibration, ConversationPlan, PromptFactory


def test_calibration_is_the_line_through_two_measurements():
    calibration = Calibration.fit((10, 110), (25, 225))
    assert calibration.tokens_per_word == pytest.approx(2.0)
    assert calibration.overhead == pytest.approx(5.0)


def test_calibration_refuses_measurements_that_do_not_grow():
    with pytest.raises(ValueError):
        Calibration.fit((10, 110), (25, 25))


def test_a_whole_prompt_pays_the_template_overhead():
    calibration = Calibration(overhead=12.0, tokens_per_word=2.0)
    assert calibration.words_for(512) == 250
    assert calibration.words_for(512, whole_prompt=False) == 256


def test_a_prompt_has_at_least_one_word():
    assert Calibration(overhead=50.0, tokens_per_word=1.0).words_for(10) == 1


def test_text_is_reproducible_from_seed_and_key():
    assert PromptFactory(7).text(40, "c1/0") == PromptFactory(7).text(40, "c1/0")
    assert len(PromptFactory(7).text(40, "c1/0").split()) == 40


def test_texts_of_other_keys_or_seeds_differ_from_the_first_word_on():
    texts = [PromptFactory(7).text(40, "a"), PromptFactory(7).text(40, "b")]
    texts.append(PromptFactory(8).text(40, "a"))
    # The first three words differ pairwise, so no prompt is a prefix of another.
    heads = {" ".join(text.split()[:3]) for text in texts}
    assert len(heads) == 3


def test_later_turns_use_the_follow_up_size_without_overhead():
    plan = ConversationPlan(
        PromptFactory(1), Calibration(overhead=10.0, tokens_per_word=1.0), 110, 20
    )
    assert len(plan.user_text("c", 1).split()) == 100
    assert len(plan.user_text("c", 2).split()) == 20
