"""The suite's own schedule (conftest.long_first): the tests marked `long` start the chunks xdist's worksteal
scheduler first sends its workers, dealt in turn, so no worker is left running one alone at the end."""

from __future__ import annotations

from conftest import long_first


class Item:
    def __init__(self, name: str, long: bool) -> None:
        self.name, self.long = name, long

    def get_closest_marker(self, name: str):
        return object() if name == "long" and self.long else None

    def __repr__(self) -> str:
        return self.name


def chunks(items: list, workers: int) -> list[list]:
    """What worksteal sends first: len(pending) // nodes_remaining contiguous items, node after node."""
    out, pending = [], list(items)
    for remaining in range(workers, 0, -1):
        n = len(pending) // remaining
        out.append(pending[:n])
        pending = pending[n:]
    return out


def test_each_worker_starts_with_its_share_of_the_long_tests_and_nothing_is_lost():
    items = [Item(f"t{i}", long=i % 37 == 5) for i in range(200)]  # long ones scattered, near the end too
    long = [i for i in items if i.long]
    ordered = long_first(items, 3)
    assert sorted(map(id, ordered)) == sorted(map(id, items))  # the same tests, each once
    firsts = chunks(ordered, 3)
    heads = [[i for i in chunk if i.long] for chunk in firsts]
    assert [len(h) for h in heads] == [2, 2, 2]  # 6 long tests, two to each worker
    for chunk, mine in zip(firsts, heads, strict=True):
        assert chunk[: len(mine)] == mine  # at the start of its chunk, not behind its short tests
    assert [i for i in ordered if not i.long] == [i for i in items if not i.long]  # the rest keeps its order
    assert {id(i) for i in long} == {id(i) for h in heads for i in h}


def test_one_process_runs_the_long_tests_first_and_a_suite_without_any_is_untouched():
    items = [Item(f"t{i}", long=i in (3, 9)) for i in range(12)]
    assert [i.name for i in long_first(items, 1)][:3] == ["t3", "t9", "t0"]
    plain = [Item(f"t{i}", long=False) for i in range(5)]
    assert long_first(plain, 3) is plain
