"""OpenAI's audio APIs: speech out (`speech/`) and speech in (`transcription/`)."""
