"""HTTP plumbing every API family shares: auth, request ids, strict JSON and multipart bodies,
client disconnects, the error policy, SSE framing and the streamed-response lifecycle.
"""
