// The @anthropic-ai/sdk Node SDK's Messages API against the server: a plain call, a streamed
// one (the SDK's MessageStream), and a forced tool call whose result goes back for the answer.
import Anthropic from "@anthropic-ai/sdk";
import { API_KEY, MODEL, PROMPT, TOOL_RESULT, URL, WEATHER_PARAMETERS, WEATHER_PROMPT, run } from "./driver_common.mjs";

const client = new Anthropic({ baseURL: URL, apiKey: API_KEY, maxRetries: 0, timeout: 60_000 });
const tools = [{ name: "get_weather", description: "The current weather in a city.", input_schema: WEATHER_PARAMETERS }];
const text = (message) => message.content.filter((b) => b.type === "text").map((b) => b.text).join("");

await run({
  async plain() {
    const reply = await client.messages.create({
      model: MODEL, max_tokens: 256, messages: [{ role: "user", content: PROMPT }],
    });
    return { text: text(reply), stop_reason: reply.stop_reason, blocks: reply.content.map((b) => b.type) };
  },
  async streamed() {
    const stream = client.messages.stream({
      model: MODEL, max_tokens: 256, messages: [{ role: "user", content: PROMPT }],
    });
    let deltas = "";
    stream.on("text", (piece) => { deltas += piece; });
    const reply = await stream.finalMessage();
    return { text: deltas, final_text: text(reply), stop_reason: reply.stop_reason, usage: reply.usage };
  },
  async tool() {
    const messages = [{ role: "user", content: WEATHER_PROMPT }];
    const reply = await client.messages.create({
      model: MODEL, max_tokens: 256, messages, tools, tool_choice: { type: "tool", name: "get_weather" },
    });
    const uses = reply.content.filter((b) => b.type === "tool_use");
    const result = { stop_reason: reply.stop_reason, tool_calls: uses.map((b) => ({ name: b.name, arguments: b.input })) };
    if (uses.length) {
      messages.push(
        { role: "assistant", content: reply.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: uses[0].id, content: TOOL_RESULT }] },
      );
      const answer = await client.messages.create({ model: MODEL, max_tokens: 256, messages, tools });
      result.answer = text(answer);
    }
    return result;
  },
});
