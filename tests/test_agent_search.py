"""Candidate tree, rewards and the two search strategies (pure logic, no models)."""

from __future__ import annotations

import math

from forge_lsp.agent.search import ROOT, SearchParams, Tree, reward, select_linear, select_mcts


def test_reward_is_zero_for_wrong_candidates_and_grows_with_speedup():
    t = Tree()
    a, b, c = t.add("a", None, "a"), t.add("b", None, "b"), t.add("c", None, "c")
    t.record("a", correct=False, speedup=None, reason="incorrect")
    t.record("b", correct=True, speedup=1.0)
    t.record("c", correct=True, speedup=3.0)
    assert reward(a) == 0.0 and 0 < reward(b) < reward(c) < 1
    assert t.best() is c
    assert t.root.value == math.fsum([reward(a), reward(b), reward(c)])  # backed up to the root


def test_linear_repairs_the_latest_failure_then_refines_the_latest_correct():
    t, p = Tree(), SearchParams(repair_limit=1)
    assert select_linear(t, p) == [t.root]
    t.add("a", None, "a")
    t.record("a", correct=True, speedup=1.5)
    assert [n.id for n in select_linear(t, p)] == ["a"]
    t.add("b", "a", "b")
    t.record("b", correct=False, speedup=None, reason="compile error")
    assert [n.id for n in select_linear(t, p)] == ["b"]  # repair mode
    t.add("c", "b", "c fix", repair=True)
    t.record("c", correct=False, speedup=None, reason="still broken")
    # repair budget of 1 used up along that chain: back to refining the latest correct candidate
    assert [n.id for n in select_linear(t, p)] == ["a"]


def test_mcts_batch_spreads_over_several_branches():
    t = Tree()
    targets = select_mcts(t, 3, SearchParams())
    assert [n.id for n in targets] == [ROOT, ROOT, ROOT]  # progressive widening lets the root grow
    for i in range(3):
        t.add(f"n{i}", None, f"n{i}")
        t.record(f"n{i}", correct=True, speedup=1.0 + i)
    picks = select_mcts(t, 4, SearchParams())
    assert len({n.id for n in picks}) >= 2  # virtual loss sends later descents elsewhere
    assert any(n.id != ROOT for n in picks)


def test_mcts_prefers_the_faster_branch_once_explored():
    t = Tree()
    for name, speed in (("slow", 1.0), ("fast", 4.0)):
        t.add(name, None, name)
        t.record(name, correct=True, speedup=speed)
    t.root.visits = 50  # a well-explored root: widening allows ceil(sqrt(51)) = 8 children, only 2 exist
    t.nodes["slow"].visits = t.nodes["fast"].visits = 10
    t.nodes["slow"].value, t.nodes["fast"].value = 10 * reward(t.nodes["slow"]), 10 * reward(t.nodes["fast"])
    p = SearchParams(widen_k=0.2)  # ceil(0.2 * sqrt(51)) = 2: the root is full, descend
    assert select_mcts(t, 1, p)[0].id == "fast"


def test_mcts_repairs_fresh_failures_first():
    t = Tree()
    t.add("ok", None, "ok")
    t.record("ok", correct=True, speedup=2.0)
    t.add("bad", "ok", "bad")
    t.record("bad", correct=False, speedup=None, reason="compile error")
    assert select_mcts(t, 2, SearchParams())[0].id == "bad"
