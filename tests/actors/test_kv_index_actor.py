"""KvIndexActor: decoded events applied to the index, sources' states, the bounded mailbox, reloads."""

import trio
import trio.testing

from switchyard.actors.kv.actor import KvIndexActor
from switchyard.actors.kv.events import AllBlocksCleared, BlockRemoved, BlockStored, EventBatch, SourceState
from switchyard.actors.routing.kv_blocks import chain
from switchyard.config.load import load_text

TOKENS = tuple(range(48))
KEYS = chain(TOKENS, 16)


def snapshot(block_size=16, names="ab", sources="a"):
    backends = "".join(f"  - {{name: {n}, type: simulated, models: [demo]}}\n" for n in names)
    feeds = ", ".join(f"{n}: {{endpoint: 'tcp://127.0.0.1:5557'}}" for n in sources)
    return load_text(f"""
kv_cache_index: {{enabled: true, block_size: {block_size}, event_sources: {{{feeds}}}}}
backends:
{backends}""", env={}).snapshot


def batch(*events, seq=0):
    return EventBatch(seq, 0.0, events)


def test_a_batch_is_applied_in_order():
    actor = KvIndexActor(snapshot())
    actor.state(SourceState("a", up=True))
    actor.apply("a", batch(BlockStored((1, 2, 3), None, TOKENS, 16), BlockRemoved((3,)),
                           BlockStored((4,), 2, TOKENS[32:], 16, medium="GPU")))
    assert actor.index.held("a", KEYS, 0.0) == 3
    actor.apply("a", batch(AllBlocksCleared(), seq=1))
    assert actor.index.held("a", KEYS, 0.0) == 0


def test_what_cannot_be_applied_is_counted_and_the_rest_of_the_batch_goes_on():
    actor = KvIndexActor(snapshot())
    actor.state(SourceState("a", up=True))
    actor.apply("a", batch(BlockStored((1,), None, TOKENS[:8], 8), BlockStored((1, 2, 3), None, TOKENS, 16)))
    assert actor.index.skipped[("a", "block_size_mismatch")] == 1
    assert actor.index.held("a", KEYS, 0.0) == 3


def test_a_backend_with_a_source_is_unknown_until_its_source_is_up_and_after_it_is_down():
    actor = KvIndexActor(snapshot())
    assert actor.index.state("a") == "unknown" and actor.index.state("b") == "approximate"
    actor.state(SourceState("a", up=True))
    assert actor.index.state("a") == "events"
    actor.state(SourceState("a", up=False, reason="no batch for 2s"))
    assert actor.index.held("a", KEYS, 0.0) is None


def test_a_reload_changing_the_block_size_empties_every_backend_and_drops_removed_ones():
    actor = KvIndexActor(snapshot())
    actor.state(SourceState("a", up=True))
    actor.apply("a", batch(BlockStored((1, 2, 3), None, TOKENS, 16)))
    actor.index.record("b", KEYS, 0.0, 60.0)
    actor.reconfigure(snapshot(block_size=32, names="abc"))
    assert actor.index.view("a").entries == 0 and actor.index.view("b").entries == 0
    assert actor.index.state("c") == "approximate"
    actor.reconfigure(snapshot(block_size=32, names="a"))
    assert actor.index.view("b") is None


async def test_offered_messages_are_applied_in_order_and_a_full_mailbox_refuses():
    actor = KvIndexActor(snapshot(), capacity=2)
    assert actor.offer(SourceState("a", up=True))
    assert actor.offer(("a", batch(BlockStored((1, 2, 3), None, TOKENS, 16))))
    assert not actor.offer(("a", batch(AllBlocksCleared(), seq=1)))     # full: the reader resyncs
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert actor.index.held("a", KEYS, 0.0) == 3 and actor.mailbox.dropped == 1
