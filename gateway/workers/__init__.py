"""The gateway's side of its workers: starting, supervising and talking to them. The client
the HTTP layer uses (`protocol.py` says what it offers, `client.py` implements it over one
supervised worker), admission, the open requests and their streams, supervision, the worker's
sockets and process (or its host on another machine), and where a model's checkpoint is
(`checkpoints.py`).
"""
