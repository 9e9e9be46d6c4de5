"""Speech out (`POST /v1/audio/speech`, the voices at `/v1/audio/voices`) and the speech
WebSocket (`/v1/audio/speech/stream`: text in as it is written, speech out phrase by phrase):
routes.py, the handlers (speech.py, websocket.py), multipart forms (form.py), the buffered or
streamed response (stream.py) and the response schemas (schemas.py). The field table and
what chat audio out and the Realtime API share (voices, formats, phrases) are
gateway/audio/speech/."""
