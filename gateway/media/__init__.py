"""Images and audio in chat requests: parsing the API parts, fetching and checking the bytes.

The gateway turns every media part into the worker contract's placeholder part
(`{"type": "image"}` / `{"type": "audio"}`) and, before the Submit is sent, into checked bytes
in `ChatInputs.images` / `ChatInputs.audios`. The worker never fetches anything.
"""
