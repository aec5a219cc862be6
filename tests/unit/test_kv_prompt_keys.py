"""A call's prompt as the KV index keys it (actors/kv/pick.py, actors/kv/tokenizers.py): one test per rule."""

import json

from switchyard.actors.kv.pick import prompt_keys
from switchyard.actors.kv.sim_tokens import SimulatedTokenizer
from switchyard.actors.kv.tokenizers import SIMULATED, tokenizer_for
from switchyard.actors.messages import Call
from switchyard.actors.routing.kv_blocks import byte_chain, canonical_chat, chain
from switchyard.config.endpoints import Endpoint
from switchyard.config.load import load_text
from switchyard.config.schema import BackendType

SNAPSHOT = load_text("""
backends:
  - {name: sim, type: simulated, models: [demo]}
  - {name: real, type: vllm, url: 'http://127.0.0.1:8000', models: [demo]}
""", env={}).snapshot
SIM, REAL = SNAPSHOT.backends
MESSAGES = [{"role": "system", "content": "You answer questions about drills and nothing else. " * 8},
            {"role": "user", "content": "Which drill for concrete?"}]


def call(payload, endpoint=Endpoint.CHAT) -> Call:
    return Call(model="demo", stream=False, body=json.dumps(payload).encode(), payload=payload, snapshot=SNAPSHOT,
                endpoint=endpoint)


def test_simulated_candidates_use_the_simulated_engines_tokenizer():
    assert tokenizer_for(SNAPSHOT, "demo", BackendType.SIMULATED) is SIMULATED
    keys = prompt_keys(call({"messages": MESSAGES}), "demo", [SIM], 16)
    assert keys == chain(SimulatedTokenizer().chat(MESSAGES), 16)


def test_other_or_mixed_candidates_without_a_tokenizer_key_the_prompts_text_as_bytes():
    assert tokenizer_for(SNAPSHOT, "demo", BackendType.VLLM) is None
    assert tokenizer_for(SNAPSHOT, "demo", None) is None
    expected = byte_chain(canonical_chat(MESSAGES).encode(), 16)
    assert prompt_keys(call({"messages": MESSAGES}), "demo", [REAL], 16) == expected
    assert prompt_keys(call({"messages": MESSAGES}), "demo", [SIM, REAL], 16) == expected


def test_a_completions_prompt_is_its_text_and_a_token_list_is_used_as_sent():
    text = "Once upon a time " * 20
    assert prompt_keys(call({"prompt": text}, Endpoint.COMPLETIONS), "demo", [REAL], 16) == \
        byte_chain(text.encode(), 16)
    tokens = list(range(40))
    assert prompt_keys(call({"prompt": tokens}, Endpoint.COMPLETIONS), "demo", [REAL], 16) == chain(tokens, 16)
    assert prompt_keys(call({"prompt": ["a", "b"]}, Endpoint.COMPLETIONS), "demo", [REAL], 16) is None


def test_a_responses_call_is_its_instructions_then_its_input():
    payload = {"instructions": MESSAGES[0]["content"], "input": MESSAGES[1]["content"]}
    assert prompt_keys(call(payload, Endpoint.RESPONSES), "demo", [SIM], 16) == \
        prompt_keys(call({"messages": MESSAGES}), "demo", [SIM], 16)


def test_calls_without_a_prompt_are_not_keyed():
    assert prompt_keys(call({"input": "x"}, Endpoint.EMBEDDINGS), "demo", [REAL], 16) is None
    assert prompt_keys(call({"messages": "not a list"}), "demo", [REAL], 16) is None
