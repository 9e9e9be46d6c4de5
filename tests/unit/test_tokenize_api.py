"""`POST /tokenize` and `POST /detokenize` (vLLM's shapes) over the real app and a scripted
engine: what reaches the worker's tokenizer calls, the answers, and the 400s naming a field."""

from __future__ import annotations

import pytest

from gateway.api.tokenize.requests import parse_detokenize, parse_tokenize
from gateway.http.errors import APIError
from gateway.workers.errors import EngineUnavailable, WorkerRejected
from protocol.inputs import ChatInputs
from protocol.messages import TokenizeArgs
from protocol.ready import Capability, TextInfo
from tests.support.fake_engine import FakeEngine, make_client, ready
from tests.support.fake_speech import AUDIO

HI = [{"role": "user", "content": "Hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def param_of(parse, body) -> str | None:
    with pytest.raises(APIError) as caught:
        parse(body)
    assert caught.value.status == 400
    return caught.value.param


# -- parsing --------------------------------------------------------------------------------


def test_a_prompt_body_takes_vllms_defaults():
    req = parse_tokenize({"model": "tiny", "prompt": "Hello"})
    assert req.model == "tiny"
    assert req.args == TokenizeArgs(prompt="Hello", add_special_tokens=True)


def test_a_prompt_body_honours_its_fields():
    body = {"prompt": "Hello", "add_special_tokens": False, "return_token_strs": True}
    req = parse_tokenize(body)
    assert req.model is None
    assert req.args == TokenizeArgs("Hello", None, False, return_token_strs=True)


def test_a_chat_body_takes_vllms_defaults():
    args = parse_tokenize({"model": "tiny", "messages": HI}).args
    assert args.prompt is None and isinstance(args.chat, ChatInputs)
    assert args.chat.messages == HI
    assert (args.add_special_tokens, args.add_generation_prompt) == (False, True)
    assert (args.continue_final_message, args.return_token_strs) == (False, False)


def test_a_chat_body_honours_its_fields():
    body = {
        "messages": [*HI, {"role": "assistant", "content": "Sure"}],
        "continue_final_message": True,
        "add_special_tokens": True,
        "chat_template_kwargs": {"enable_thinking": False},
        "tools": [TOOL],
        "return_token_strs": True,
        "chat_template": None,
        "mm_processor_kwargs": {},
        "media_io_kwargs": None,
    }
    args = parse_tokenize(body).args
    # An open final message: no generation prompt unless asked (and then it is a 400).
    assert (args.continue_final_message, args.add_generation_prompt) == (True, False)
    assert args.add_special_tokens and args.return_token_strs
    assert args.chat.chat_template_kwargs == {"enable_thinking": False}
    assert args.chat.tools[0]["function"]["name"] == "f"
    assert parse_tokenize({"messages": HI, "add_generation_prompt": False}).args == TokenizeArgs(
        chat=ChatInputs(HI, args.chat.sampling), add_special_tokens=False,
        add_generation_prompt=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "prompt"),
        ({"prompt": ["Hello"]}, "prompt"),
        ({"prompt": [1, 2]}, "prompt"),
        ({"prompt": "a", "messages": HI}, "prompt"),
        ({"prompt": "a", "add_special_tokens": "yes"}, "add_special_tokens"),
        ({"prompt": "a", "return_token_strs": 1}, "return_token_strs"),
        ({"prompt": "a", "model": 3}, "model"),
        ({"prompt": "a", "add_generation_prompt": False}, "add_generation_prompt"),
        ({"prompt": "a", "tools": []}, "tools"),
        ({"prompt": "a", "max_tokens": 3}, "max_tokens"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": HI, "max_tokens": 3}, "max_tokens"),
        ({"messages": HI, "tool_choice": "auto"}, "tool_choice"),
        ({"messages": HI, "chat_template": "{{ messages }}"}, "chat_template"),
        ({"messages": HI, "chat_template": 5}, "chat_template"),
        ({"messages": HI, "chat_template_kwargs": []}, "chat_template_kwargs"),
        ({"messages": HI, "mm_processor_kwargs": "x"}, "mm_processor_kwargs"),
        ({"messages": HI, "tools": [{"type": "web"}]}, "tools[0].type"),
        (
            {"messages": HI, "continue_final_message": True, "add_generation_prompt": True},
            "continue_final_message",
        ),
    ],
)
def test_bad_tokenize_bodies_are_400s_naming_the_field(body, param):
    assert param_of(parse_tokenize, body) == param


def test_media_parts_are_refused_naming_the_part():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    body = {"messages": [{"role": "user", "content": [image]}]}
    assert param_of(parse_tokenize, body) == "messages[0].content[0].type"


def test_a_detokenize_body_is_the_model_and_the_ids():
    req = parse_detokenize({"model": "tiny", "tokens": [1, 2.0, 0]})
    assert (req.model, req.tokens) == ("tiny", [1, 2, 0])
    assert parse_detokenize({"tokens": []}).tokens == []


@pytest.mark.parametrize(
    "body",
    [{}, {"tokens": "1 2"}, {"tokens": [1, -1]}, {"tokens": [1.5]}, {"tokens": [True]},
     {"tokens": [2**63]}, {"tokens": [[1]]}],
)  # fmt: skip
def test_bad_token_ids_are_400s_naming_tokens(body):
    assert param_of(parse_detokenize, body) == "tokens"


def test_unknown_detokenize_fields_are_400s_naming_them():
    assert param_of(parse_detokenize, {"tokens": [1], "prompt": "x"}) == "prompt"


# -- the routes -----------------------------------------------------------------------------


def test_tokenize_answers_vllms_shape_with_the_context_length():
    engine = FakeEngine()
    with make_client(engine) as client:
        got = client.post("/tokenize", json={"model": "tiny", "prompt": "Hello"})
    assert got.status_code == 200
    assert got.json() == {
        "count": 3,
        "max_model_len": 4096,
        "tokens": [5, 6, 7],
        "token_strs": None,
    }
    assert engine.tokenized == [TokenizeArgs("Hello", add_special_tokens=True)]


def test_tokenize_returns_token_strings_when_asked():
    with make_client(FakeEngine()) as client:
        body = {"messages": HI, "return_token_strs": True}
        got = client.post("/tokenize", json=body).json()
    assert got["token_strs"] == ["t5", "t6", "t7"] and got["count"] == 3


def test_max_model_len_is_null_when_the_checkpoint_does_not_say():
    engine = FakeEngine()
    engine.ready_info = ready(Capability.CHAT, text=TextInfo(None, "continuous"))
    with make_client(engine) as client:
        assert client.post("/tokenize", json={"prompt": "x"}).json()["max_model_len"] is None


def test_detokenize_answers_the_prompt():
    engine = FakeEngine()
    with make_client(engine) as client:
        got = client.post("/detokenize", json={"model": "tiny", "tokens": [1, 2]})
    assert got.status_code == 200 and got.json() == {"prompt": "decoded"}
    assert engine.tokenized == [[1, 2]]


def test_the_model_may_be_left_out_or_must_be_the_chat_model():
    engine = FakeEngine()
    with make_client(engine) as client:
        assert client.post("/tokenize", json={"prompt": "x"}).status_code == 200
        assert client.post("/detokenize", json={"tokens": [1]}).status_code == 200
        unknown = client.post("/tokenize", json={"model": "gpt-x", "prompt": "x"})
        assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "model"
        unknown = client.post("/detokenize", json={"model": "gpt-x", "tokens": [1]})
        assert unknown.status_code == 404
    assert len(engine.tokenized) == 2


@pytest.mark.parametrize("path", ["/tokenize", "/detokenize"])
def test_a_server_without_a_text_model_answers_400_naming_model(path):
    engine = FakeEngine()
    engine.model_name, engine.model_path = "tiny-tts", "/models/tiny-tts"
    engine.ready_info = ready(Capability.SPEECH, model="/models/tiny-tts", text=None, speech=AUDIO)
    body = {"prompt": "x"} if path == "/tokenize" else {"tokens": [1]}
    with make_client(engine) as client:
        for sent in (body, {**body, "model": "tiny-tts"}):
            got = client.post(path, json=sent)
            assert got.status_code == 400, got.text
            assert got.json()["error"]["param"] == "model"
    assert engine.tokenized == []


def test_a_worker_rejection_is_a_400_with_its_message():
    engine = FakeEngine()
    engine.tokenize_error = WorkerRejected("`tokens[1]` = 99999 is not a token id of this model")
    with make_client(engine) as client:
        got = client.post("/detokenize", json={"tokens": [1, 99999]})
        assert got.status_code == 400
        assert got.json()["error"]["param"] == "tokens"
        assert "tokens[1]" in got.json()["error"]["message"]
        engine.tokenize_error = WorkerRejected("the chat template rejected the messages: no")
        got = client.post("/tokenize", json={"messages": HI})
        assert got.status_code == 400 and "chat template" in got.json()["error"]["message"]


def test_no_ready_worker_is_a_503():
    engine = FakeEngine()
    engine.tokenize_error = EngineUnavailable("no ready worker", 1.0)
    with make_client(engine) as client:
        got = client.post("/tokenize", json={"prompt": "x"})
    assert got.status_code == 503 and got.headers["retry-after"] == "1"


@pytest.mark.parametrize("path", ["/v1/tokenize", "/v1/detokenize"])
def test_there_are_no_v1_paths_as_in_vllm(path):
    with make_client(FakeEngine()) as client:
        assert client.post(path, json={"prompt": "x", "tokens": [1]}).status_code == 404


def test_the_endpoints_need_the_api_key_when_one_is_set():
    with make_client(FakeEngine(), api_key="k") as client:
        assert client.post("/tokenize", json={"prompt": "x"}).status_code == 401
        headers = {"Authorization": "Bearer k"}
        assert client.post("/tokenize", json={"prompt": "x"}, headers=headers).status_code == 200
