"""The OpenAI Agents SDK's function-tool loop on its Chat Completions model and on its
Responses model: the first turn must call the tool (tool_choice "required"; the SDK's
reset_tool_choice then lets the next turn answer), the second answers from its result."""

from __future__ import annotations

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from driver_common import API_KEY, MODEL, TOOL_RESULT, URL, WEATHER_PROMPT, run
from openai import AsyncOpenAI

set_tracing_disabled(True)
MODELS = {"chat_completions": OpenAIChatCompletionsModel, "responses": OpenAIResponsesModel}


def tool_loop(api: str) -> dict:
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        calls.append(city)
        return TOOL_RESULT

    client = AsyncOpenAI(base_url=f"{URL}/v1", api_key=API_KEY, max_retries=0, timeout=60)
    agent = Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=MODELS[api](model=MODEL, openai_client=client),
        model_settings=ModelSettings(tool_choice="required", max_tokens=256),
        reset_tool_choice=True,
    )
    result = Runner.run_sync(agent, WEATHER_PROMPT, max_turns=4)
    return {
        "final_output": result.final_output,
        "tool_calls": calls,
        "items": [item.type for item in result.new_items],
        "model_responses": len(result.raw_responses),
    }


run({api: (lambda a=api: tool_loop(a)) for api in MODELS})
