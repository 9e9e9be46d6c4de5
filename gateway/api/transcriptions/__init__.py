"""Speech in (`POST /v1/audio/transcriptions`, `POST /v1/audio/translations`): routes.py, the
handlers (transcriptions.py), the upload form's field tables and parsing (request.py), the
transcription stream (stream.py) and the response schemas (schemas.py). OpenAI's response
formats (json, text, verbose_json, srt, vtt), which the `transcribe` command writes too, are
gateway/audio/transcription/formats.py."""
