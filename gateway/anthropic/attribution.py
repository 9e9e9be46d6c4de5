"""Claude Code's attribution line, taken out of the system prompt before it is templated.

Claude Code (2.1.36 and later) sends, as the first `system` text block, a line such as

    x-anthropic-billing-header: cc_version=2.1.332.1c9; cc_entrypoint=sdk-cli;

(builds that sign their requests append `cch=<a hash of the request>;`; 2.1.332 from
npm, as tested here, does not). It is billing metadata for
Anthropic's API, not an instruction to the model, and it is not stable: the version's suffix
differs from session to session (it follows the session's first message) and `cch` from
request to request. Left in the prompt it stands before the system prompt and the tool
definitions, so the prefix cache could reuse neither: every new session (each `claude -p`,
each subagent) and, with `cch`, every turn would prefill Claude Code's whole ~15K-token prompt
again. Only that one line is removed, and only at the very start of the system prompt; the
rest of the system prompt is templated as sent.
"""

from __future__ import annotations

ATTRIBUTION_PREFIX = "x-anthropic-billing-header:"


def without_attribution(system_text: str) -> str:
    """`system_text` without a leading attribution line (and the newline that ends it)."""
    if not system_text.startswith(ATTRIBUTION_PREFIX):
        return system_text
    _, _, rest = system_text.partition("\n")
    return rest
