"""The gateway's side of the engines in a worker process: the client the HTTP layer uses
(`protocol.py` says what it offers, `client.py` implements it over one supervised worker),
admission, the open requests and their streams, supervision, the worker's sockets and process.
"""
