"""The OpenAI chat-completions and completions APIs: request fields, messages, tools, chunks
and logprobs in OpenAI's shapes.
"""
