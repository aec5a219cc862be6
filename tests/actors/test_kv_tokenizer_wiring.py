"""The operator's tokenizer files reach the pick: loaded by the Runtime at start, read again on a reload
(a file it cannot read rejects the revision), and the prompt's blocks keyed by the model's own tokens."""

from __future__ import annotations

from pathlib import Path

import trio

from switchyard.actors.kv.pick import prompt_keys
from switchyard.actors.kv.tokenizer_files import FileTokenizer
from switchyard.actors.messages import Call
from switchyard.actors.routing.kv_blocks import chain
from switchyard.config.endpoints import Endpoint
from switchyard.config.load import load_text
from switchyard.protocol.serving.wiring import new_runtime
from tests.unit.test_kv_tokenizer_files import TEMPLATE, make_tokenizer

CONFIG = """
prefix_routing: {{enabled: true}}
kv_cache_index:
  enabled: true
  block_size: 2
  tokenizers:
    llama*: {{tokenizer: {tokenizer}, chat_template: {template}}}
backends:
  - {{name: a, type: vllm, url: "http://127.0.0.1:9", models: [llama-3], discovery: false}}
  - {{name: b, type: vllm, url: "http://127.0.0.1:9", models: [llama-3], discovery: false}}
"""


def files(folder: Path) -> str:
    tokenizer = make_tokenizer(folder / "tok")
    (folder / "template.jinja").write_text(TEMPLATE)
    return CONFIG.format(tokenizer=tokenizer, template=folder / "template.jinja")


async def test_a_models_prompt_is_keyed_by_the_tokens_of_its_configured_tokenizer(tmp_path):
    path = tmp_path / "switchyard.yaml"
    path.write_text(files(tmp_path))
    snapshot = load_text(path.read_text()).snapshot
    async with trio.open_nursery() as nursery:
        runtime = await nursery.start(new_runtime(snapshot, config_path=str(path), watch=False).run)
        loaded = runtime.pool.kv.tokenizers.for_model("llama-3")
        assert isinstance(loaded, FileTokenizer)
        messages = [{"role": "user", "content": "tell me a story about a cat"}]
        call = Call(model="llama-3", stream=False, body=b"{}", payload={"model": "llama-3", "messages": messages},
                    snapshot=snapshot, endpoint=Endpoint.CHAT)
        keys = prompt_keys(call, "llama-3", snapshot.backends, 2, None, runtime.pool.kv.tokenizers)
        assert keys == chain(loaded.chat(messages), 2) and keys
        nursery.cancel_scope.cancel()


async def test_a_reload_whose_tokenizer_file_cannot_be_read_is_rejected_and_the_loaded_one_kept(tmp_path):
    path = tmp_path / "switchyard.yaml"
    path.write_text(files(tmp_path))
    async with trio.open_nursery() as nursery:
        runtime = await nursery.start(new_runtime(load_text(path.read_text()).snapshot, config_path=str(path),
                                                  watch=False).run)
        before = runtime.pool.kv.tokenizers
        (tmp_path / "tok" / "tokenizer.json").write_text("{not json")
        answer = runtime.reload_from_file("test")
        assert answer["result"] == "rejected"
        assert any("kv_cache_index.tokenizers.llama*" in e for e in answer["errors"])
        assert runtime.pool.kv.tokenizers is before
        nursery.cancel_scope.cancel()


async def test_a_reload_after_a_tokenizer_file_changed_uses_the_new_one_even_with_the_config_unchanged(tmp_path):
    path = tmp_path / "switchyard.yaml"
    path.write_text(files(tmp_path))
    async with trio.open_nursery() as nursery:
        runtime = await nursery.start(new_runtime(load_text(path.read_text()).snapshot, config_path=str(path),
                                                  watch=False).run)
        before = runtime.pool.kv.tokenizers.for_model("llama-3")
        template = tmp_path / "template.jinja"
        template.write_text("[new] " + TEMPLATE)
        assert runtime.reload_from_file("test")["result"] == "unchanged"   # the config's text is the same
        after = runtime.pool.kv.tokenizers.for_model("llama-3")
        assert isinstance(after, FileTokenizer) and after is not before
        messages = [{"role": "user", "content": "hi"}]
        assert after.chat(messages) != before.chat(messages)
        nursery.cancel_scope.cancel()
