"""The operator's tokenizer files (actors/kv/tokenizer_files.py): a tokenizer.json read by the `tokenizers`
library and a chat template rendered as transformers renders it give the token ids the engine computes.
The tokenizer is trained here, on a few sentences, by the library itself; nothing is downloaded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

from switchyard.actors.kv.chat_template import ChatTemplate, vllm_message
from switchyard.actors.kv.tokenizer_files import (
    FileTokenizer,
    TokenizerFileError,
    Tokenizers,
    load_tokenizer,
    load_tokenizers,
    special_tokens,
)
from switchyard.config.load import ConfigError

SENTENCES = ["the cat sat on the mat", "a dog ran in the park", "what is the weather today",
             "tell me a story about a cat", "system you are helpful", "user assistant tool"]
SPECIALS = ["[UNK]", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|>\n{% endfor %}"
            "{% if tools %}<|system|> {{ tools | tojson }} <|end|>\n{% endif %}"
            "{% if add_generation_prompt %}<|assistant|> {% endif %}")


@attrs.frozen
class Files:
    tokenizer: str
    chat_template: str | None = None


def make_tokenizer(folder: Path) -> Path:
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(special_tokens=SPECIALS))
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def reference(path: Path) -> Tokenizer:
    return Tokenizer.from_file(str(path))


CHAT = [{"role": "system", "content": "you are helpful"}, {"role": "user", "content": "tell me a story"}]


def test_a_chat_is_the_rendered_template_encoded_without_added_special_tokens(tmp_path):
    path = make_tokenizer(tmp_path)
    (tmp_path / "template.jinja").write_text(TEMPLATE)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": {"content": "<s>", "special": True}}))
    tokenizer = load_tokenizer(path, tmp_path / "template.jinja")
    rendered = "<s><|system|> you are helpful <|end|>\n<|user|> tell me a story <|end|>\n<|assistant|> "
    assert tokenizer.chat(CHAT) == reference(path).encode(rendered, add_special_tokens=False).ids
    assert tokenizer.chat(CHAT)[:2] == [reference(path).token_to_id("<s>"), reference(path).token_to_id("<|system|>")]


def test_a_completions_prompt_is_encoded_with_the_tokenizers_special_tokens(tmp_path):
    path = make_tokenizer(tmp_path)
    (tmp_path / "template.jinja").write_text(TEMPLATE)
    ids = load_tokenizer(path, tmp_path / "template.jinja").text("the cat sat")
    assert ids == reference(path).encode("the cat sat").ids
    assert ids[0] == reference(path).token_to_id("<s>")


def test_the_template_and_bos_may_come_from_tokenizer_config_json(tmp_path):
    path = make_tokenizer(tmp_path / "model")
    config = tmp_path / "model" / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": TEMPLATE.replace("{{ bos_token }}", "{{ eos_token }}"),
                                  "bos_token": "<s>", "eos_token": "</s>"}))
    tokenizer = load_tokenizer(path, config)
    assert tokenizer.chat(CHAT)[0] == reference(path).token_to_id("</s>")


def test_without_a_template_named_the_one_beside_tokenizer_json_is_used(tmp_path):
    path = make_tokenizer(tmp_path)
    (tmp_path / "chat_template.jinja").write_text("{% for m in messages %}{{ m['content'] }} {% endfor %}")
    assert load_tokenizer(path).chat(CHAT) == reference(path).encode("you are helpful tell me a story ",
                                                                      add_special_tokens=False).ids


def test_named_templates_pick_tool_use_when_the_call_has_tools(tmp_path):
    path = make_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": [
        {"name": "default", "template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"},
        {"name": "tool_use", "template": "tool {{ tools[0]['function']['name'] }}"}]}))
    tokenizer = load_tokenizer(path)
    tools = [{"type": "function", "function": {"name": "weather"}}]
    assert tokenizer.chat(CHAT, tools) == reference(path).encode("tool weather", add_special_tokens=False).ids
    assert tokenizer.chat(CHAT) == reference(path).encode("you are helpfultell me a story",
                                                          add_special_tokens=False).ids


def test_the_environment_is_transformers(tmp_path):
    """Sandboxed, trim/lstrip blocks, loop controls, {% generation %}, tojson keeping non-ASCII, raise_exception."""
    template = ChatTemplate("{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}\n"
                            "  {% generation %}{{ m | tojson }}{% endgeneration %}\n{% endfor %}", {})
    assert template.render([{"role": "user", "content": "é"}, {"role": "user", "content": "x"}]) == \
        '{"role": "user", "content": "é"}'   # trim_blocks: no newline after a tag; lstrip_blocks: no indent
    refusing = ChatTemplate("{{ raise_exception('roles must alternate') }}", {})
    with pytest.raises(Exception, match="roles must alternate"):
        refusing.render(CHAT)
    with pytest.raises(Exception, match="unsafe|not safely|access"):
        ChatTemplate("{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}", {}).render(CHAT)


def test_messages_are_shaped_as_vllm_shapes_them():
    parts = {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"},
                                         {"type": "text", "text": "b"}]}
    assert vllm_message(parts)["content"] == "a\nb"
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]}
    shaped = vllm_message(call)
    assert shaped["content"] == "" and shaped["tool_calls"][0]["function"]["arguments"] == {"x": 1}
    assert "tool_calls" not in vllm_message({"role": "assistant", "content": "hi", "tool_calls": []})


def test_special_tokens_are_read_as_strings_or_added_token_objects():
    config = {"bos_token": {"content": "<s>", "lstrip": False}, "eos_token": "</s>", "pad_token": None,
              "additional_special_tokens": ["<a>", {"content": "<b>"}]}
    assert special_tokens(config) == {"bos_token": "<s>", "eos_token": "</s>",
                                      "additional_special_tokens": ["<a>", "<b>"]}


@pytest.mark.parametrize("setup, message", [
    (lambda d: None, "tokenizer.json: No such file"),
    (lambda d: (d / "tokenizer.json").write_text("{}"), "not a tokenizer.json"),
    (lambda d: (make_tokenizer(d), (d / "chat_template.jinja").write_text("{% for %}")), "does not compile"),
    (lambda d: (make_tokenizer(d), (d / "tokenizer_config.json").write_text("[1")), "not JSON"),
])
def test_files_that_cannot_be_used_are_named(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(TokenizerFileError, match=message):
        load_tokenizer(tmp_path / "tokenizer.json")


def test_a_template_file_named_must_hold_a_template(tmp_path):
    path = make_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>"}))
    with pytest.raises(TokenizerFileError, match="tokenizer_config.json: no chat_template in it"):
        load_tokenizer(path, tmp_path / "tokenizer_config.json")


def test_without_any_template_chat_calls_are_not_keyed(tmp_path):
    """A base model: no template named, a tokenizer_config.json beside without one."""
    path = make_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>"}))
    tokenizer = load_tokenizer(path)
    assert tokenizer.chat(CHAT) == []
    assert tokenizer.text("the cat") == reference(path).encode("the cat").ids


def test_a_chat_the_template_refuses_is_not_keyed(tmp_path):
    path = make_tokenizer(tmp_path)
    (tmp_path / "chat_template.jinja").write_text(
        "{% if messages[0]['role'] != 'user' %}{{ raise_exception('user first') }}{% endif %}{{ bos_token }}")
    assert load_tokenizer(path).chat(CHAT) == []


def test_load_errors_are_config_errors_naming_the_entry(tmp_path):
    path = make_tokenizer(tmp_path / "good")
    (tmp_path / "good" / "chat_template.jinja").write_text(TEMPLATE)
    entries = {"llama-*": Files(str(path)), "qwen-*": Files(str(tmp_path / "missing" / "tokenizer.json"))}
    with pytest.raises(ConfigError) as refused:
        load_tokenizers(entries, "config.yaml")
    assert refused.value.errors == [f"kv_cache_index.tokenizers.qwen-*: {tmp_path}/missing/tokenizer.json: "
                                    "No such file or directory"]


def test_the_models_name_then_the_first_matching_glob_and_unchanged_files_are_not_read_again(tmp_path):
    path = make_tokenizer(tmp_path)
    (tmp_path / "chat_template.jinja").write_text(TEMPLATE)
    entries = {"llama-*": Files(str(path)), "llama-3-*": Files(str(path)), "llama-3-8b": Files(str(path))}
    first = load_tokenizers(entries, "config.yaml")
    assert first.for_model("llama-3-8b") is first.by_glob["llama-3-8b"]   # its own name before any glob
    assert first.for_model("llama-3-70b") is first.by_glob["llama-*"]
    assert first.for_model("qwen") is None
    again = load_tokenizers(entries, "config.yaml", previous=first)
    assert again.by_glob["llama-3-*"] is first.by_glob["llama-3-*"]
    stat = os.stat(tmp_path / "chat_template.jinja")
    (tmp_path / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")
    os.utime(tmp_path / "chat_template.jinja", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    changed = load_tokenizers(entries, "config.yaml", previous=first)
    assert changed.by_glob["llama-3-*"] is not first.by_glob["llama-3-*"]
    assert isinstance(changed.by_glob["llama-3-*"], FileTokenizer)
    assert changed.by_glob["llama-3-*"].chat(CHAT) == reference(path).encode("you are helpful",
                                                                             add_special_tokens=False).ids
    assert Tokenizers().for_model("x") is None
