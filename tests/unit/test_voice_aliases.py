"""OpenAI's voice names on the served TTS model (gateway/audio/speech/voice_aliases.py): the
default table per family, `--voice-alias` overrides, what wins over an alias, and how
`/v1/audio/voices` shows them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from msgspec.structs import replace

from gateway.audio.speech.voice_aliases import OPENAI_VOICES, alias_table, default_voice
from gateway.cli import main as cli
from protocol.ready import Capability, Voice
from tests.support.fake_engine import FakeEngine, make_client, ready
from tests.support.fake_speech import AUDIO, BODY, speech_script

FEMALE = ("alloy", "coral", "nova", "sage", "shimmer", "marin")
MALE = ("ash", "ballad", "echo", "fable", "onyx", "verse", "cedar")


def speech_info(family: str, *names: str):
    return replace(AUDIO, family=family, voices=[Voice(n) for n in names])


def table_of(audio, overrides=()) -> dict[str, str | None]:
    return {a.name: a.voice for a in alias_table(audio, overrides).values()}


def test_qwen3_tts_maps_openai_voices_to_presets_of_the_same_kind_in_the_models_order():
    table = table_of(speech_info("qwen3_tts", "vivian", "ryan", "eric"))
    assert list(table) == list(OPENAI_VOICES)
    assert {table[n] for n in FEMALE} == {"vivian"}
    assert [table[n] for n in MALE] == ["ryan", "eric", "ryan", "eric", "ryan", "eric", "ryan"]


def test_qwen3_tts_real_speakers_spread_over_all_presets_of_each_kind():
    speakers = ("serena", "vivian", "uncle_fu", "ryan", "aiden", "ono_anna", "sohee", "eric")
    table = table_of(speech_info("qwen3_tts", *speakers, "dylan"))
    assert [table[n] for n in FEMALE[:4]] == ["serena", "vivian", "ono_anna", "sohee"]
    assert [table[n] for n in MALE[:5]] == ["uncle_fu", "ryan", "aiden", "eric", "dylan"]


def test_kokoro_takes_its_openai_named_packs_then_the_gender_in_the_name():
    packs = ("af_heart", "af_alloy", "am_adam", "am_echo", "bm_fable", "af_nova", "am_onyx")
    table = table_of(speech_info("kokoro", *packs))
    assert (table["alloy"], table["echo"], table["fable"]) == ("af_alloy", "am_echo", "bm_fable")
    assert (table["nova"], table["onyx"]) == ("af_nova", "am_onyx")
    assert table["coral"] in ("af_heart", "af_alloy", "af_nova")
    assert table["ash"] in ("am_adam", "am_echo", "bm_fable", "am_onyx")


def test_a_family_without_known_voices_takes_the_presets_in_order():
    table = table_of(speech_info("other", "a", "b", "c"))
    assert [table[n] for n in OPENAI_VOICES] == ["a", "b", "c"] * 4 + ["a"]
    assert set(table_of(speech_info("soprano", "default")).values()) == {"default"}
    # Only female presets known: male names fall back to the list order.
    assert table_of(speech_info("kokoro", "af_heart", "ef_dora"))["ash"] == "ef_dora"


def test_a_model_without_presets_speaks_its_own_default_voice():
    assert set(table_of(speech_info("voxcpm2")).values()) == {None}


def test_a_models_own_voice_is_never_aliased():
    audio = speech_info("other", "alloy", "bob")
    assert "alloy" not in table_of(audio, [("alloy", "bob")])
    assert default_voice("echo", audio) == "alloy"  # the presets in order: echo is the 5th


def test_overrides_replace_defaults_and_add_names():
    audio = speech_info("qwen3_tts", "vivian", "ryan")
    aliases = alias_table(audio, [("alloy", "RYAN"), ("narrator", "vivian")])
    assert (aliases["alloy"].voice, aliases["alloy"].source) == ("ryan", "--voice-alias")
    assert list(aliases)[-1] == "narrator" and aliases["narrator"].voice == "vivian"
    assert aliases["echo"].source == "default"


def test_an_override_naming_no_preset_carries_its_error():
    alias = alias_table(speech_info("qwen3_tts", "vivian"), [("alloy", "bob")])["alloy"]
    assert "--voice-alias alloy=bob" in alias.error and "vivian" in alias.error


# -- over HTTP -------------------------------------------------------------------------------


def engine_with(audio=AUDIO) -> FakeEngine:
    engine = FakeEngine(speech_script(b"\x01\x00" * 40))
    engine.ready_info = ready(Capability.CHAT, Capability.SPEECH, model="/m/chat", speech=audio)
    return engine


def speak(client, voice):
    return client.post("/v1/audio/speech", json={**BODY, "model": "tts-1", "voice": voice})


@pytest.mark.parametrize(("voice", "preset"), [("alloy", "vivian"), ("Onyx", "ryan")])
def test_openai_voices_reach_the_worker_as_the_models_presets(voice, preset):
    engine = engine_with()
    with make_client(engine) as client:
        assert speak(client, voice).status_code == 200
    assert engine.last.inputs.voice == preset


def test_voice_alias_overrides_and_names_of_the_model_win():
    engine = engine_with(replace(AUDIO, voices=[Voice("ryan"), Voice("vivian"), Voice("echo")]))
    overrides = (("alloy", "ryan"), ("echo", "vivian"), ("narrator", "Vivian"))
    with make_client(engine, voice_aliases=overrides) as client:
        for voice, preset in (("alloy", "ryan"), ("echo", "echo"), ("narrator", "vivian")):
            assert speak(client, voice).status_code == 200
            assert engine.last.inputs.voice == preset


def test_an_override_naming_no_preset_is_a_400_naming_the_option():
    with make_client(engine_with(), voice_aliases=(("alloy", "bob"),)) as client:
        response = speak(client, "alloy")
        assert speak(client, "nova").status_code == 200
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "voice"
    assert "--voice-alias alloy=bob" in error["message"] and "ryan, vivian" in error["message"]


def test_on_a_model_without_presets_an_openai_voice_names_none():
    engine = engine_with(replace(AUDIO, voices=[]))
    with make_client(engine) as client:
        assert speak(client, "alloy").status_code == 200
    assert engine.last.inputs.voice is None


def test_a_saved_voice_wins_over_an_alias_of_the_same_name():
    engine = engine_with(replace(AUDIO, cloning=True))
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(64)
    with make_client(engine) as client:
        saved = client.post(
            "/v1/audio/voices", data={"name": "alloy"}, files={"audio_sample": ("v.wav", wav)}
        )
        assert saved.status_code == 200, saved.text
        assert speak(client, "alloy").status_code == 200
    assert (engine.last.inputs.voice, engine.last.inputs.ref_audio) == (None, wav)


def test_voices_lists_the_aliases_next_to_the_unchanged_listing():
    with make_client(engine_with(), voice_aliases=(("alloy", "ryan"), ("x", "bob"))) as client:
        body = client.get("/v1/audio/voices").json()
    assert [v["name"] for v in body["voices"]] == ["ryan", "vivian"]
    aliases = {a["name"]: a for a in body["aliases"]}
    assert list(aliases) == [*OPENAI_VOICES, "x"]
    assert aliases["alloy"] == {"name": "alloy", "voice": "ryan", "source": "--voice-alias"}
    assert aliases["nova"] == {"name": "nova", "voice": "vivian", "source": "default"}
    assert "bob" in aliases["x"]["error"]


# -- the flag --------------------------------------------------------------------------------


def test_serve_takes_repeated_voice_aliases(no_serving, tmp_path):
    args = ["serve", str(tmp_path), "--voice-alias", "alloy=ryan", "--voice-alias", " a = b "]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    assert no_serving[0].config.voice_aliases == (("alloy", "ryan"), ("a", "b"))


@pytest.mark.parametrize(
    ("values", "words"),
    [(["alloy"], "NAME=VOICE"), (["=ryan"], "NAME=VOICE"), (["a=x", "A=y"], "more than once")],
)
def test_malformed_voice_aliases_are_refused_at_start(no_serving, tmp_path, values, words):
    args = ["serve", str(tmp_path)]
    for value in values:
        args += ["--voice-alias", value]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 2 and words in result.output
    assert no_serving == []
