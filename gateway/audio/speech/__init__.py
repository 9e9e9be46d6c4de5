"""Speech out, as `/v1/audio/speech` (gateway/api/speech/), chat completions' audio out and the
Realtime API share it: the request's field table and parsing (request.py), voices (presets,
OpenAI's names, saved clone voices), the served speech model as a request sees it (served.py),
text spoken phrase by phrase (phrases.py), and PCM encoded into the response formats
(encoding.py).
"""
