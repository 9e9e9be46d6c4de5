"""Speech in, as `/v1/audio/transcriptions` and `/translations` (gateway/api/transcriptions/)
and the `transcribe` command share it: OpenAI's response formats (formats.py).
"""
