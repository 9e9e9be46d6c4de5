"""OpenAI chat completions and completions (`/v1/chat/completions`, `/v1/completions`):
routes.py, the handlers (chat.py, completions.py), the completions field table and parsing
(surface.py, requests.py; a chat body's are gateway/generation/chat_body.py, which the Realtime
API reads too), stream chunks (chunks.py), answers spoken by the TTS model (audio_out.py) and
their transcripts by audio id (spoken_answers.py), and the response schemas (schemas.py)."""
