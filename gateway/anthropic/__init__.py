"""The Anthropic Messages API: request parsing, content conversion, Message objects, events."""
