// The openai Node SDK's Chat Completions against the server: a plain call, a streamed one,
// and a forced tool call whose result goes back for the answer.
import OpenAI from "openai";
import { API_KEY, MODEL, PROMPT, TOOL_RESULT, URL, WEATHER_PARAMETERS, WEATHER_PROMPT, run } from "./driver_common.mjs";

const client = new OpenAI({ baseURL: `${URL}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 60_000 });
const tools = [
  {
    type: "function",
    function: { name: "get_weather", description: "The current weather in a city.", parameters: WEATHER_PARAMETERS },
  },
];
const user = (content) => [{ role: "user", content }];

await run({
  async plain() {
    const reply = await client.chat.completions.create({ model: MODEL, messages: user(PROMPT), max_tokens: 256 });
    return { text: reply.choices[0].message.content, finish_reason: reply.choices[0].finish_reason };
  },
  async streamed() {
    const stream = await client.chat.completions.create({
      model: MODEL, messages: user(PROMPT), max_tokens: 256, stream: true,
      stream_options: { include_usage: true },
    });
    let text = "", chunks = 0, finish = null, usage = null;
    for await (const chunk of stream) {
      chunks += 1;
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        text += choice.delta.content ?? "";
        finish = choice.finish_reason ?? finish;
      }
    }
    return { text, chunks, finish_reason: finish, usage };
  },
  async tool() {
    const messages = user(WEATHER_PROMPT);
    const reply = await client.chat.completions.create({
      model: MODEL, messages, tools, max_tokens: 256,
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    const message = reply.choices[0].message;
    const calls = message.tool_calls ?? [];
    const result = {
      finish_reason: reply.choices[0].finish_reason,
      tool_calls: calls.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })),
    };
    if (calls.length) {
      messages.push(message, { role: "tool", tool_call_id: calls[0].id, content: TOOL_RESULT });
      const answer = await client.chat.completions.create({ model: MODEL, messages, tools, max_tokens: 256 });
      result.answer = answer.choices[0].message.content;
    }
    return result;
  },
});
