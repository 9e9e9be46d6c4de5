"""What the chat-style APIs (OpenAI chat and completions, Anthropic Messages, Responses) share:
the generation request they parse into, its life (admission, collection or streaming), the
merged output of a choice, the n > 1 fan-in, tools and structured-output constraints.
"""
