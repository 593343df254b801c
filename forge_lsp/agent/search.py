"""The candidate tree and the two search strategies.

Every candidate is a node; the root stands for the reference module (speedup 1). A node's
reward is 0 when its candidate is not correct, else ``tanh(speedup / 2)`` (1x → 0.46, 2x → 0.76,
4x → 0.96), so a wrong candidate earns nothing and gains flatten out.

- `linear` (CudaForge): each round refines the latest correct candidate, or repairs the latest
  failed one while it has repair attempts left.
- `mcts` (Kernel Forge): fresh failures are repaired first. The rest of the batch comes from UCT
  descents from the root with progressive widening: a node may have at most
  ``ceil(widen_k * (visits + 1) ** widen_alpha)`` children before the descent must go deeper.
  Each selection counts as a visit at once (virtual loss), so one batch spreads over several
  branches.

Pure data and arithmetic: no models, no evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

ROOT = "root"


@dataclass(eq=False)
class Node:
    id: str
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    summary: str = ""
    correct: bool | None = None  # None: the root, or not evaluated yet
    speedup: float | None = None
    reason: str = ""  # why it failed
    repair: bool = False  # this node was written to fix its parent
    visits: int = 0
    value: float = 0.0

    @property
    def failed(self) -> bool:
        return self.correct is False

    @property
    def repairs(self) -> int:
        return sum(1 for c in self.children if c.repair)

    def path(self) -> list[Node]:
        node: Node | None = self
        out: list[Node] = []
        while node is not None:
            out.append(node)
            node = node.parent
        return out[::-1]


def reward(node: Node) -> float:
    if not node.correct or node.speedup is None:
        return 0.0
    return math.tanh(max(node.speedup, 0.0) / 2.0)


class Tree:
    def __init__(self) -> None:
        self.root = Node(ROOT, summary="reference", correct=True, speedup=1.0)
        self.nodes: dict[str, Node] = {ROOT: self.root}
        self.order: list[Node] = []  # candidates in creation order

    def add(self, node_id: str, parent_id: str | None, summary: str, *, repair: bool = False) -> Node:
        parent = self.nodes[parent_id or ROOT]
        node = Node(node_id, parent=parent, summary=summary, repair=repair)
        parent.children.append(node)
        self.nodes[node_id] = node
        self.order.append(node)
        return node

    def record(self, node_id: str, *, correct: bool, speedup: float | None, reason: str = "") -> None:
        """An evaluated candidate: set its outcome and back up its reward to the root."""
        node = self.nodes[node_id]
        node.correct, node.speedup, node.reason = correct, speedup, reason
        r = reward(node)
        node.visits += 1
        node.value += r
        for ancestor in node.path()[:-1]:
            ancestor.value += r

    def best(self) -> Node | None:
        done = [n for n in self.order if n.correct and n.speedup is not None]
        return max(done, key=lambda n: n.speedup or 0.0) if done else None

    def branches(self) -> int:
        """Root children with descendants or siblings: how many distinct lines of work exist."""
        return len(self.root.children)


@dataclass
class SearchParams:
    exploration: float = 1.0
    widen_k: float = 1.0
    widen_alpha: float = 0.5
    repair_limit: int = 2


def _repairable(node: Node, params: SearchParams) -> bool:
    return node.failed and node.repairs < params.repair_limit and _repair_depth(node) < params.repair_limit


def _repair_depth(node: Node) -> int:
    depth = 0
    while node.repair and node.parent is not None:
        depth += 1
        node = node.parent
    return depth


def select_linear(tree: Tree, params: SearchParams) -> list[Node]:
    """One target: repair the latest candidate if it failed (and may be repaired), else refine the
    latest correct candidate, else start from the reference."""
    if tree.order and _repairable(tree.order[-1], params):
        return [tree.order[-1]]
    latest_correct = next((n for n in reversed(tree.order) if n.correct), None)
    return [latest_correct or tree.root]


def select_mcts(tree: Tree, k: int, params: SearchParams) -> list[Node]:
    """Up to `k` expansion targets: fresh failures to repair first, then UCT descents."""
    targets: list[Node] = []
    fresh = [n for n in tree.order if _repairable(n, params) and not n.children]
    for node in fresh[-k:]:
        targets.append(node)
        for p in node.path():
            p.visits += 1
    while len(targets) < k:
        node = tree.root
        while True:
            allowed = math.ceil(params.widen_k * (node.visits + 1) ** params.widen_alpha)
            options = [c for c in node.children if c.correct]
            if len(node.children) < allowed or not options:
                break
            node = max(options, key=lambda c: _uct(c, node, params.exploration))
        targets.append(node)
        for p in node.path():  # virtual loss: the next descent sees this one as visited
            p.visits += 1
    return targets


def _uct(child: Node, parent: Node, c: float) -> float:
    if child.visits == 0:
        return math.inf
    return child.value / child.visits + c * math.sqrt(math.log(parent.visits + 1) / child.visits)
