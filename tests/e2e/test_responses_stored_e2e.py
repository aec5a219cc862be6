"""End-to-end: compaction and stored responses (retrieve, cancel, delete, input items) through Switchyard,
with the official openai SDK, on a real socket, against simulated backends."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.e2e.support import Gateway, backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

KEY_A, KEY_B = "sk-team-a-0123456789abcdef", "sk-team-b-0123456789abcdef"


def keyed(*backends: dict, **top) -> dict:
    return gateway_config(*backends, api_keys=[{"id": "a", "key": KEY_A}, {"id": "b", "key": KEY_B}], **top)


def sdk(gw: Gateway, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key=key, max_retries=0, timeout=10)


def stored_calls(gw: Gateway, name: str) -> int:
    """How many stored-response calls (retrieve, cancel, delete, input items) backend ``name`` answered."""
    return sum(1 for _, kind in gw.sim(name).events if kind.startswith("stored:"))


async def test_compact_answers_the_backends_compaction_object(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client:
        compacted = await in_thread(client.responses.compact, model="demo",
                                    input=[{"role": "user", "content": "hello"}])
    assert compacted.object == "response.compaction"
    assert [item.type for item in compacted.output] == ["message", "compaction"]
    assert compacted.usage.total_tokens > 0


async def test_compact_fails_over_before_any_byte(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a", failure={"status": 503}), backend("sim-b"),
                                            retry={"max_attempts": 1}))
    with sdk(gw) as client:
        for _ in range(2):   # round robin: one of them starts on the failing backend
            compacted = await in_thread(client.responses.compact, model="demo", input="hello")
            assert compacted.output[-1].created_by == "sim-b"
    assert gw.sim("sim-a").count("status:503") >= 1


async def test_compact_is_routed_through_alias_dispatch(start_gateway):
    sim = backend("sim-a")
    sim["models"] = ["demo-2026"]
    sim["model_configs"] = [{"id": "demo-2026", "aliases": ["demo"]}]
    gw = await start_gateway(gateway_config(sim))
    with sdk(gw) as client:
        compacted = await in_thread(client.responses.compact, model="demo", input="hello")
    assert compacted.object == "response.compaction"
    assert gw.sim("sim-a").requests[-1].read().count(b'"demo-2026"') == 1


async def test_a_stored_response_is_retrieved_listed_and_deleted_on_the_backend_that_created_it(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a"), backend("sim-b")))

    def flow(client: openai.OpenAI):
        created = [client.responses.create(model="demo", input=f"hi {i}") for i in range(2)]
        got = [client.responses.retrieve(r.id) for r in created]
        items = [client.responses.input_items.list(r.id) for r in created]
        deleted = [client.responses.delete(r.id) for r in created]
        return created, got, items, deleted

    with sdk(gw) as client:
        created, got, items, deleted = await in_thread(flow, client)
    assert {r.id.split("_")[1] for r in created} == {"sim-a", "sim-b"}   # one on each backend
    assert [g.id for g in got] == [r.id for r in created] and all(g.output_text for g in got)
    assert [page.data[0].content[0].text for page in items] == ["hi 0", "hi 1"]
    assert deleted == [None, None]
    for name in ("sim-a", "sim-b"):   # each backend saw only its own response's calls
        assert stored_calls(gw, name) == 3


async def test_a_deleted_response_is_then_unknown(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a")))
    with sdk(gw) as client:
        created = await in_thread(client.responses.create, model="demo", input="hi")
        await in_thread(client.responses.delete, created.id)
        with pytest.raises(openai.NotFoundError):
            await in_thread(client.responses.retrieve, created.id)
    assert stored_calls(gw, "sim-a") == 1   # the second lookup never left the gateway


async def test_a_background_response_is_cancelled_on_its_backend(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a"), backend("sim-b")))
    with sdk(gw) as client:
        created = await in_thread(client.responses.create, model="demo", input="hi", background=True)
        cancelled = await in_thread(client.responses.cancel, created.id)
    assert created.status == "in_progress" and cancelled.status == "cancelled" and cancelled.id == created.id


async def test_another_keys_response_is_not_found_exactly_like_an_unknown_id(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a")))
    with sdk(gw, KEY_A) as owner:
        created = await in_thread(owner.responses.create, model="demo", input="secret")
    answers = []
    async with httpx.AsyncClient(base_url=gw.v1, headers={"authorization": f"Bearer {KEY_B}"}) as other:
        for rid in (created.id, "resp_never_made"):
            for method, path in (("GET", ""), ("GET", "/input_items"), ("POST", "/cancel"), ("DELETE", "")):
                reply = await other.request(method, f"/responses/{rid}{path}")
                answers.append((reply.status_code, reply.json()["error"]["message"].replace(rid, "ID")))
    assert set(answers) == {(404, "Response with id 'ID' not found.")}
    assert stored_calls(gw, "sim-a") == 0   # nothing of it reached the backend
    with sdk(gw, KEY_A) as owner:   # the owner still has it
        assert (await in_thread(owner.responses.retrieve, created.id)).id == created.id


async def test_another_keys_response_is_no_previous_response_id(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a")))
    with sdk(gw, KEY_A) as owner:
        created = await in_thread(owner.responses.create, model="demo", input="secret")
    with sdk(gw, KEY_B) as other:
        with pytest.raises(openai.BadRequestError) as refused:
            await in_thread(other.responses.create, model="demo", input="what did I say?",
                            previous_response_id=created.id)
    assert refused.value.body["param"] == "previous_response_id"
    assert len(gw.sim("sim-a").requests) == 1


async def test_a_previous_response_id_not_relayed_for_this_key_is_refused_before_anything_is_sent(start_gateway):
    """An id the gateway cannot vouch for as this key's (never relayed, or forgotten past the bounds) is
    never passed on: the backend is called with the gateway's credentials and could continue another
    key's conversation."""
    gw = await start_gateway(keyed(backend("sim-a"), stored_responses={"max_entries": 1}))
    with sdk(gw, KEY_A) as client:
        first = await in_thread(client.responses.create, model="demo", input="one")
        await in_thread(client.responses.create, model="demo", input="two")   # first is forgotten
        for unknown in ("resp_never_seen", first.id):
            with pytest.raises(openai.BadRequestError) as refused:
                await in_thread(client.responses.create, model="demo", input="more", previous_response_id=unknown)
            assert (refused.value.body["param"], refused.value.body["code"]) == \
                ("previous_response_id", "previous_response_not_found")
    assert len(gw.sim("sim-a").requests) == 2


async def test_previous_response_id_prefers_the_backend_holding_it(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a"), backend("sim-b")))

    def chain(client: openai.OpenAI):
        first = client.responses.create(model="demo", input="one")
        return first, [client.responses.create(model="demo", input="more", previous_response_id=first.id)
                       for _ in range(3)]

    with sdk(gw) as client:
        first, nexts = await in_thread(chain, client)
    holder = first.id.split("_")[1]
    assert {r.id.split("_")[1] for r in nexts} == {holder}   # round robin would have alternated


async def test_the_owner_map_forgets_past_max_entries(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a"), stored_responses={"max_entries": 2}))
    with sdk(gw) as client:
        created = [await in_thread(client.responses.create, model="demo", input="hi") for _ in range(3)]
        with pytest.raises(openai.NotFoundError):
            await in_thread(client.responses.retrieve, created[0].id)   # the oldest went first
        assert (await in_thread(client.responses.retrieve, created[2].id)).id == created[2].id


async def test_a_response_created_with_store_false_is_not_remembered(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a")))
    with sdk(gw) as client:
        created = await in_thread(client.responses.create, model="demo", input="hi", store=False)
        with pytest.raises(openai.NotFoundError):
            await in_thread(client.responses.retrieve, created.id)
    assert stored_calls(gw, "sim-a") == 0


async def test_a_streamed_response_is_remembered_from_its_created_event(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a")))

    def flow(client: openai.OpenAI):
        events = list(client.responses.create(model="demo", input="hi", stream=True))
        return events[-1].response, client.responses.retrieve(events[0].response.id)

    with sdk(gw) as client:
        final, got = await in_thread(flow, client)
    assert got.id == final.id and got.output_text == final.output_text


async def test_unknown_stored_response_paths_and_methods_are_refused(start_gateway):
    gw = await start_gateway(keyed(backend("sim-a")))
    async with httpx.AsyncClient(base_url=gw.v1, headers={"authorization": f"Bearer {KEY_A}"}) as client:
        assert (await client.get("/responses/resp_1/other")).status_code == 404
        assert (await client.post("/responses/resp_1")).status_code == 405
        assert (await client.put("/responses/resp_1")).status_code == 405
        assert (await client.get("/responses/resp_1")).status_code == 404
        assert (await client.get("/responses/x", headers={"authorization": "Bearer nope"})).status_code == 401
