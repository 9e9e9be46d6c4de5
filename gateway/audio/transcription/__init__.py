"""`/v1/audio/transcriptions` and `/translations`: upload forms, the transcription stream and
OpenAI's response formats.
"""
