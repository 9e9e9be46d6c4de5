"""What the APIs that generate text share (chat completions and completions, Anthropic
Messages, Responses, the Realtime API's responses): the generation request they parse into
(request.py), its life (lifecycle.py: admission, collection or streaming, abort), the merged
output of a choice (output.py), the n > 1 fan-in (fan_in.py), tools (tools.py),
structured-output constraints (structured.py), an OpenAI chat body's field table and parser
(chat_body.py; the Realtime API builds its responses as chat bodies), OpenAI's chat messages
and tools read into the worker's inputs (openai_messages.py, openai_tools.py; /tokenize reads
them too) and OpenAI's logprobs objects (logprobs.py). It imports no API package (gateway/api/).
"""
