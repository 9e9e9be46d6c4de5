"""`/v1/realtime`: OpenAI's Realtime API over a WebSocket, a voice agent built from the served
models: Silero VAD (vad.py) -> the speech-recognition model -> the chat model (tools
allowed) -> the TTS model, every stage streaming (docs/speech.md, "Realtime").

    routes.py       the WebSocket route: the session limit, the chat model, the event loop
    names.py        the event and content names of the GA interface and the beta one
    wire.py         reading client events (sizes, JSON, ids) and writing server events
    config.py       the session's settings: session.update (GA and beta shapes), rendering
    items.py        conversation items: parsing, rendering, turning them into chat messages
    input_audio.py  the input audio buffer, server VAD turns, commits
    response.py     one response: chat deltas -> text / transcript / audio / function calls
    session.py      one connection: dispatching client events, the conversation, barge-in
"""
