"""`vllm-omni-mlx bench`: an HTTP load client for any OpenAI-compatible server.

It measures, from the client's side, time to first token, inter-token latency, end-to-end
latency and tokens per second over a sweep of concurrency levels, optionally as multi-turn
conversations, and writes a table, JSON and CSV. It runs in the gateway's install and imports
no MLX: the server under test may be ours, mlx-lm's or anyone's.

Modules: `sse` (stream parsing), `prompts` (prompts of a requested token count), `client` (one
streamed request), `runner` (levels and conversations), `stats` (percentiles), `report`
(table / JSON / CSV), `options` + `command` (the CLI).
"""
