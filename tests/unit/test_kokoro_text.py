"""Kokoro's text front end (worker/speech/kokoro_text.py): English through espeak-ng without
misaki[en], and phonemes cut into chunks Kokoro can speak (a sentence each, at most 510, cut at
the most natural mark that fits, nothing dropped)."""

from __future__ import annotations

import pytest

from worker.speech.kokoro_text import MAX_PHONEMES, chunks, language_code, load_g2p


def test_sentences_are_chunks_of_their_own():
    assert list(chunks("həlˈO. haʊ ɑːɹ juː? faɪn!  ")) == ["həlˈO.", "haʊ ɑːɹ juː?", "faɪn!"]


def test_a_long_sentence_is_cut_at_its_clause_marks_first():
    clause = "a" * 200
    text = f"{clause}, {clause}; {clause}, {clause}."
    got = list(chunks(text))
    assert all(len(c) <= MAX_PHONEMES for c in got)
    assert got[0] == f"{clause}, {clause};"  # the semicolon outranks the later comma
    assert "".join(got).replace(" ", "") == text.replace(" ", "")


def test_words_then_letters_when_nothing_else_fits():
    words = " ".join(["wɜːd"] * 300)  # 1,499 phonemes, no punctuation
    got = list(chunks(words))
    assert all(len(c) <= MAX_PHONEMES for c in got) and len(got) == 3
    assert " ".join(got) == words
    blob = "x" * 1200
    assert list(chunks(blob)) == ["x" * 510, "x" * 510, "x" * 180]


def test_blank_input_gives_no_chunks():
    assert list(chunks("   ")) == [] and list(chunks("")) == []


@pytest.mark.parametrize("limit", [5, 13, 40])
def test_no_phoneme_is_lost_at_any_limit(limit):
    text = "ðə kwˈɪk bɹˈWn fˈɑːks, ʤˈʌmps ˌOvɚ; ðə lˈAzi dˈɑːɡ. ænd ɹˈʌnz əwˈA!"
    got = list(chunks(text, limit))
    assert all(0 < len(c) <= limit for c in got)
    assert "".join(got).replace(" ", "") == text.replace(" ", "")


def test_language_codes_and_aliases():
    assert [language_code(x) for x in ("en", "EN-US", "en-gb", "es", "a", "pt")] == [
        "a", "a", "b", "e", "a", "p",
    ]  # fmt: skip


def test_english_is_read_through_espeak_ng_with_kokoro_flaps():
    pytest.importorskip("misaki.espeak", reason="needs misaki, phonemizer-fork, espeakng-loader")
    g2p = load_g2p("a")
    phonemes = g2p("The quick brown fox jumps over the lazy dog. Forty two!")
    assert phonemes.startswith("ðə kwˈɪk bɹˈWn fˈɑːks")
    assert "ɾ" not in phonemes and "T" in phonemes  # forty: American flap as Kokoro's T
    assert load_g2p("b")("water") != g2p("water")  # British English is its own G2P


def test_a_language_without_a_g2p_names_what_to_install():
    with pytest.raises(ImportError, match="no G2P"):
        load_g2p("q")
