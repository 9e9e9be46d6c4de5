"""LangChain's ChatOpenAI (Chat Completions) and ChatAnthropic (Messages) against the server:
invoke, stream, bind_tools (a forced call, then its result back for the answer) and
with_structured_output (a pydantic model); and OpenAIEmbeddings (embed_documents, embed_query)
against the embedding model served next to the chat model."""

from __future__ import annotations

from driver_common import (
    API_KEY,
    EMBED_TEXTS,
    EMBEDDING_MODEL,
    MODEL,
    PROMPT,
    TOOL_RESULT,
    URL,
    WEATHER_PROMPT,
    run,
)
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool as lc_tool
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from pydantic import BaseModel


class Person(BaseModel):
    name: str
    age: int


@lc_tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return TOOL_RESULT


def chat(provider: str):
    if provider == "openai":
        return ChatOpenAI(
            model=MODEL, base_url=f"{URL}/v1", api_key=API_KEY, max_retries=0, timeout=60
        )
    return ChatAnthropic(
        model=MODEL, base_url=URL, api_key=API_KEY, max_tokens=256, max_retries=0, timeout=60
    )


def invoke(provider: str) -> dict:
    reply = chat(provider).invoke(PROMPT)
    return {"text": reply.text, "usage": reply.usage_metadata}


def stream(provider: str) -> dict:
    chunks = list(chat(provider).stream(PROMPT))
    return {"text": "".join(c.text for c in chunks), "chunks": len(chunks)}


def bind_tools(provider: str) -> dict:
    model = chat(provider).bind_tools([get_weather], tool_choice="get_weather")
    messages = [HumanMessage(WEATHER_PROMPT)]
    reply = model.invoke(messages)
    result = {"tool_calls": [{"name": c["name"], "args": c["args"]} for c in reply.tool_calls]}
    if reply.tool_calls:
        call = reply.tool_calls[0]
        messages += [reply, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
        result["answer"] = chat(provider).bind_tools([get_weather]).invoke(messages).text
    return result


def structured(provider: str) -> dict:
    person = chat(provider).with_structured_output(Person).invoke("Make up a person.")
    return {"type": type(person).__name__, "value": person.model_dump()}


def embeddings() -> dict:
    # check_embedding_ctx_length=False: else LangChain sends tiktoken's token ids (OpenAI's
    # vocabulary), not the texts.
    model = OpenAIEmbeddings(
        model=EMBEDDING_MODEL, base_url=f"{URL}/v1", api_key=API_KEY,
        check_embedding_ctx_length=False, max_retries=0, timeout=60,
    )  # fmt: skip
    return {
        "texts": EMBED_TEXTS,
        "documents": model.embed_documents(EMBED_TEXTS),
        "query": model.embed_query(EMBED_TEXTS[0]),
    }


run(
    {
        **{
            f"{provider}-{case.__name__}": (lambda p=provider, c=case: c(p))
            for provider in ("openai", "anthropic")
            for case in (invoke, stream, bind_tools, structured)
        },
        "openai-embeddings": embeddings,
    }
)
