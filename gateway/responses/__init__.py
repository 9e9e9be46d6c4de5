"""The OpenAI Responses API: request parsing, input items, output objects, events, store."""
