"""Claude Code's attribution line, taken out of the system prompt before it is templated.

Recent Claude Code versions (2.1.x) send, as the first `system` text block, a line such as

    x-anthropic-billing-header: cc_version=2.1.332.1c9; cc_entrypoint=sdk-cli;

(builds that sign their requests append `cch=<a hash of the request>;`; 2.1.332 from npm, as
tested here, does not). It is billing metadata for Anthropic's API, not an instruction to the
model, and it is not stable: the version's suffix differs from session to session (it follows
the session's first message) and `cch` from request to request. Left in the prompt it stands
before the system prompt and the tool definitions, so the prefix cache could reuse neither:
every new session (each `claude -p`, each subagent) and, with `cch`, every turn would prefill
Claude Code's whole ~15K-token prompt again.

Only a line of exactly that shape (the name, then `key=value;` pairs, then the end of the
line) is removed, and only at the very start of the system prompt. Anything else, such as
text that follows the pairs on the same line, leaves the system prompt as sent: losing the
instructions would be worse than a prefix-cache miss. Only the Messages API does this; on the
OpenAI APIs a system message is templated as sent.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"x-anthropic-billing-header:(?:[ \t]*[\w.-]+=[^;\r\n]*;)*[ \t]*(?:\r?\n|\Z)")


def without_attribution(system_text: str) -> str:
    """`system_text` without a leading attribution line (and the line break that ends it)."""
    line = _LINE.match(system_text)
    return system_text[line.end() :] if line else system_text
