// What the Node drivers share (the Python ones: driver_common.py): the server from
// VOMLX_URL / VOMLX_API_KEY / VOMLX_MODEL, the cases (or those named in argv) run in order,
// one JSON line out: case -> {ok, seconds, what it saw | error}. A driver asserts nothing.
export const URL = process.env.VOMLX_URL;
export const API_KEY = process.env.VOMLX_API_KEY;
export const MODEL = process.env.VOMLX_MODEL;
export const PROMPT = "Say hello.";
export const WEATHER_PROMPT = "What is the weather in Paris?";
export const TOOL_RESULT = "Sunny, 21 degrees.";
export const WEATHER_PARAMETERS = {
  type: "object",
  properties: { city: { type: "string", description: "The city" } },
  required: ["city"],
};

export async function run(cases) {
  const chosen = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(cases);
  const results = {};
  for (const name of chosen) {
    const started = performance.now();
    let result;
    try {
      result = { ok: true, ...(await cases[name]()) };
    } catch (error) {
      result = { ok: false, error: String(error?.stack ?? error).slice(-4000) };
    }
    result.seconds = Math.round(performance.now() - started) / 1000;
    results[name] = result;
  }
  console.log(JSON.stringify(results));
}
