"""`--chat-template FILE` in the worker (worker/text/chat_template.py): the file renders every
chat prompt, the formats are detected from it, and one that does not compile fails the load."""

from __future__ import annotations

import pytest

from tests.support.inputs import chat
from worker.text.chat_template import replace_chat_template
from worker.text.model import load_text_model
from worker.text.prompts import chat_prompt_tokens
from worker.tiny_models import ensure_checkpoint

TEMPLATE = (
    "{% for m in messages %}[{{ m['role'] | upper }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
)


@pytest.fixture
def qwen3():
    return load_text_model(str(ensure_checkpoint("qwen3")))


def test_the_file_renders_the_prompt(qwen3, tmp_path):
    path = tmp_path / "template.jinja"
    path.write_text(TEMPLATE)
    replace_chat_template(qwen3.tokenizer, str(path))
    tokens = chat_prompt_tokens(qwen3.tokenizer, chat([{"role": "user", "content": "hi there"}]))
    assert qwen3.tokenizer.decode(tokens) == "[USER] hi there\n[ASSISTANT]"


def test_a_template_that_does_not_compile_fails_naming_the_file(qwen3, tmp_path):
    path = tmp_path / "broken.jinja"
    path.write_text("{% for m in messages %}{{ m['content'] }")
    with pytest.raises(ValueError, match="broken.jinja"):
        replace_chat_template(qwen3.tokenizer, str(path))
