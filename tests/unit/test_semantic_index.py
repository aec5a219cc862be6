"""The semantic cache's vector index (``actors/cache/index.py``): rows found, replaced, evicted and forgotten."""

from switchyard.actors.cache.index import SemanticIndex

NS = b"namespace"


def axis(i: int, dim: int = 64) -> list[float]:
    """A unit vector along dimension ``i``: orthogonal to every other axis."""
    return [1.0 if d == i else 0.0 for d in range(dim)]


def found(index: SemanticIndex, i: int) -> bytes | None:
    match = index.search(NS, axis(i), 0.99, 0.0)
    return None if match is None else match.answer_key


def test_rows_stay_findable_after_removals_move_others_into_their_place():
    index = SemanticIndex(100)
    for i in range(40):
        index.add(NS, axis(i), f"k{i}".encode(), 10.0)
    for i in range(0, 40, 3):
        index.remove(NS, f"k{i}".encode())
    assert [found(index, i) for i in range(40)] == [None if i % 3 == 0 else f"k{i}".encode() for i in range(40)]
    assert index.entries == 26


def test_past_max_entries_the_oldest_go_first():
    index = SemanticIndex(5)
    for i in range(12):
        index.add(NS, axis(i), f"k{i}".encode(), 10.0)
    assert [i for i in range(12) if found(index, i)] == [7, 8, 9, 10, 11]


def test_an_expired_best_match_gives_way_to_the_next_one_above_the_threshold():
    index = SemanticIndex(10)
    index.add(NS, [1.0, 0.0], b"old", 1.0)
    index.add(NS, [1.0, 0.05], b"fresh", 10.0)
    assert index.search(NS, [1.0, 0.0], 0.99, 5.0).answer_key == b"fresh"
    assert index.search(NS, [1.0, 0.0], 0.99, 0.5).answer_key == b"old"
    assert index.search(NS, [0.0, 1.0], 0.99, 0.5) is None


def test_adding_a_key_again_replaces_its_row():
    index = SemanticIndex(10)
    index.add(NS, axis(1), b"k", 10.0)
    index.add(NS, axis(2), b"k", 10.0)
    assert (found(index, 1), found(index, 2), index.entries) == (None, b"k", 1)


def test_many_one_entry_namespaces_hold_about_as_much_memory_as_their_entries():
    """Most namespaces (a key, a conversation so far, a parameter set) hold one entry: none reserves rows."""
    index = SemanticIndex(1000)
    for i in range(200):
        index.add(f"ns{i}".encode(), axis(i % 64, 1536), b"k", 10.0)
    held = sum(space.buf.nbytes for space in index._spaces.values())
    assert held == 200 * 1536 * 4   # one float32 row each
