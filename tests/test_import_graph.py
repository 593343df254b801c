"""The layers of ARCHITECTURE.md, checked over every import of every module of the package — including
imports inside functions, which an import-time check never sees.

Each rule names the modules it constrains and what they may not import, and says why; the rules are the
"Architecture Invariant" lines of ARCHITECTURE.md that are about dependencies.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "forge_lsp"

#: The hot-spot children: their mains (`runner`, `model_check`) and the `child_*` modules only they import.
HOTSPOT_CHILD = (
    "forge_lsp.hotspots.runner",
    "forge_lsp.hotspots.model_check",
    "forge_lsp.hotspots.child_entry",
    "forge_lsp.hotspots.child_source",
    "forge_lsp.hotspots.child_observe",
    "forge_lsp.hotspots.child_profile",
    "forge_lsp.hotspots.child_attribute",
    "forge_lsp.hotspots.child_capture",
)
HOTSPOT_CHILD_RULE = "the hot-spot child's modules are imported only inside a child process"

#: What only the profiled process loads: CUPTI and the passes over the call.
PROFILED_PROCESS = ("forge_lsp.profiler.cupti", "forge_lsp.profiler.inprocess")

#: Modules that run only in child processes (workers, profiled and probe subprocesses, candidates, examples):
#: the only ones that may import torch or triton. The server, the CLI and the agent never do.
CHILD_PROCESS_MODULES = (
    "forge_lsp.engine.worker",
    "forge_lsp.engine.zygote_child",
    "forge_lsp.engine.harness",
    "forge_lsp.runtime",
    "forge_lsp.profiler.target",
    *PROFILED_PROCESS,
    "forge_lsp.profiler.peaks",
    "forge_lsp.agent.offline.probe",
    "forge_lsp.agent.offline.library",
    "forge_lsp.examples",
    *HOTSPOT_CHILD,
    "forge_lsp.hotspots.patching",
)

#: What the front ends reach only through the use cases (forge_lsp.usecases).
BEHIND_THE_USE_CASES = (
    "forge_lsp.agent.optimize",
    "forge_lsp.agent.provider",
    "forge_lsp.agent.offline",
    "forge_lsp.agent.narrative",
    "forge_lsp.agent.roles",
    "forge_lsp.profiler.ncu",
    "forge_lsp.profiler.analyze",
    "forge_lsp.profiler.roofline",
    "forge_lsp.reintegrate",
    "forge_lsp.hotspots",
)

#: The language server without its features: the server, the wire, the protocol's types, its state, and the `Feature`
#: protocol. The features (`forge_lsp.server.features`) stand on it; the composition root (`app`) puts them together.
SERVER_CORE = (
    "forge_lsp.server.server",
    "forge_lsp.server.feature",
    "forge_lsp.server.protocol",
    "forge_lsp.server.state",
    "forge_lsp.server.settings",
    "forge_lsp.server.messages",
    "forge_lsp.server.transport",
    "forge_lsp.server.session",
)
SERVER_COMPOSITION = ("forge_lsp.server.features", "forge_lsp.server.app")


@dataclass(frozen=True)
class Rule:
    name: str
    applies_to: tuple[str, ...]  # module prefixes the rule constrains ("*": every module)
    forbidden: tuple[str, ...]  # module prefixes those may not import
    exempt: tuple[str, ...] = ()  # module prefixes the rule does not constrain
    allowed: tuple[str, ...] = ()  # with forbidden=("forge_lsp",): the forge_lsp modules that are allowed


RULES = (
    Rule("only the language server speaks LSP", ("*",), ("pygls", "lsprotocol"), exempt=("forge_lsp.server",)),
    Rule("only the provider talks to models", ("*",), ("openai",), exempt=("forge_lsp.agent.provider",)),
    Rule("torch and triton only in child processes", ("*",), ("torch", "triton"), exempt=CHILD_PROCESS_MODULES),
    Rule("only the Ray executor imports ray", ("*",), ("ray",), exempt=("forge_lsp.engine.ray_executor",)),
    Rule(
        "CUPTI is loaded only in the profiled process",
        ("*",),
        PROFILED_PROCESS,
        exempt=("forge_lsp.profiler.target", *PROFILED_PROCESS),
    ),
    Rule("the sandbox stands alone", ("forge_lsp.sandbox",), ("forge_lsp",)),
    Rule("the thread-safe parse stands alone", ("forge_lsp.parsing",), ("forge_lsp",)),
    Rule("the child-process request and script runner stand alone", ("forge_lsp.child",), ("forge_lsp",)),
    Rule(
        "the engine knows nothing above it",
        ("forge_lsp.engine",),
        ("forge_lsp",),
        allowed=("forge_lsp.engine", "forge_lsp.runtime", "forge_lsp.sandbox", "forge_lsp.parsing", "forge_lsp.child"),
    ),
    Rule(
        "the workspace index is AST only",
        ("forge_lsp.workspace",),
        ("forge_lsp",),
        allowed=("forge_lsp.workspace", "forge_lsp.parsing"),
    ),
    Rule(
        "reintegration is text in, text out",
        ("forge_lsp.reintegrate",),
        ("forge_lsp",),
        allowed=("forge_lsp.reintegrate", "forge_lsp.engine.verdict", "forge_lsp.parsing"),
    ),
    Rule(
        "the profiler sits on the engine",
        ("forge_lsp.profiler",),
        ("forge_lsp",),
        allowed=(
            "forge_lsp.profiler",
            "forge_lsp.engine",
            "forge_lsp.runtime",
            "forge_lsp.sandbox",
            "forge_lsp.parsing",
            "forge_lsp.child",
        ),
    ),
    Rule(
        "the agent knows no front end and no use case",
        ("forge_lsp.agent",),
        ("forge_lsp",),
        allowed=(
            "forge_lsp.agent",
            "forge_lsp.engine",
            "forge_lsp.profiler",
            "forge_lsp.sandbox",
            "forge_lsp.runtime",
            "forge_lsp.words",
            "forge_lsp.child",
        ),
    ),
    Rule(
        "whole-model profiling stands on the sandbox alone",
        ("forge_lsp.hotspots",),
        ("forge_lsp",),
        allowed=("forge_lsp.hotspots", "forge_lsp.sandbox", "forge_lsp.parsing", "forge_lsp.words", "forge_lsp.child"),
    ),
    Rule(
        HOTSPOT_CHILD_RULE,
        ("*",),
        HOTSPOT_CHILD,
        exempt=(*HOTSPOT_CHILD, "forge_lsp.hotspots.patching"),
    ),
    Rule("the use cases know no front end", ("forge_lsp.usecases",), ("forge_lsp.server", "forge_lsp.cli")),
    Rule("the CLI is an adapter over the use cases", ("forge_lsp.cli",), ("forge_lsp.server", *BEHIND_THE_USE_CASES)),
    Rule(
        "the server is an adapter over the use cases", ("forge_lsp.server",), ("forge_lsp.cli", *BEHIND_THE_USE_CASES)
    ),
    Rule("the server knows no feature: the composition root puts them together", SERVER_CORE, SERVER_COMPOSITION),
    Rule("a feature knows no composition root", ("forge_lsp.server.features",), ("forge_lsp.server.app",)),
)


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(p == "*" or name == p or name.startswith(p + ".") for p in prefixes)


def modules(package: Path = PACKAGE) -> dict[str, tuple[str, bool]]:
    """Every module of the package: name -> (source, is a package)."""
    out = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path.read_text(encoding="utf-8"), is_pkg)
    return out


def imports(name: str, source: str, is_pkg: bool, known: set[str]) -> list[tuple[str, int]]:
    """(imported module, line) for every import statement anywhere in the module, relative ones resolved;
    `from pkg import sub` counts `pkg.sub` when that is a module."""
    found = []
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (
                ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                if node.level
                else node.module
            )
            found.append((base, node.lineno))
            found += [(f"{base}.{a.name}", node.lineno) for a in node.names if f"{base}.{a.name}" in known]
    return found


def violations(mods: dict[str, tuple[str, bool]]) -> list[str]:
    known = set(mods)
    out = []
    for name, (source, is_pkg) in sorted(mods.items()):
        for target, line in imports(name, source, is_pkg, known):
            for rule in RULES:
                if not _under(name, rule.applies_to) or _under(name, rule.exempt):
                    continue
                if _under(target, rule.forbidden) and not _under(target, rule.allowed):
                    out.append(f"{name}:{line} imports {target}: {rule.name}")
    return out


@pytest.mark.integration
def test_the_package_keeps_its_layers():
    assert violations(modules()) == []


def test_every_rule_constrains_something_that_exists():
    mods = modules()
    for rule in RULES:
        assert rule.applies_to == ("*",) or any(_under(m, rule.applies_to) for m in mods), rule.name
    for prefix in CHILD_PROCESS_MODULES + BEHIND_THE_USE_CASES + SERVER_CORE + SERVER_COMPOSITION:
        assert any(_under(m, (prefix,)) for m in mods), f"{prefix} names no module (renamed?)"


@pytest.mark.integration
def test_the_parent_reaching_into_the_hot_spot_child_is_caught():
    """Not vacuous: the parent's `hotspots.run` importing the child's run (so the user's model would run in the process
    that asked) is reported; `patching`, which the model check and a user's patch file import, may use the child's
    `constant`."""
    mods = modules()
    source, is_pkg = mods["forge_lsp.hotspots.run"]
    mods["forge_lsp.hotspots.run"] = (source + "\n\ndef _f():\n    from .child_profile import run\n", is_pkg)
    found = violations(mods)
    assert any(
        v.startswith("forge_lsp.hotspots.run:")
        and v.endswith("imports forge_lsp.hotspots.child_profile: " + HOTSPOT_CHILD_RULE)
        for v in found
    ), found
    assert not any(v.startswith("forge_lsp.hotspots.patching:") for v in found), found


@pytest.mark.integration
def test_a_forbidden_import_is_caught_even_inside_a_function():
    """The check is not vacuous: add an engine module that imports the server lazily, and a server module
    that reaches the optimizer around the use cases, and both are reported with their lines."""
    mods = modules()
    mods["forge_lsp.engine._injected"] = ("def f():\n    from ..server import server\n    return server\n", False)
    mods["forge_lsp.server.features._injected"] = (
        "import os\n\n\ndef g():\n    import forge_lsp.agent.optimize\n",
        False,
    )
    found = violations(mods)
    assert "forge_lsp.engine._injected:2 imports forge_lsp.server: the engine knows nothing above it" in found
    assert any(v.startswith("forge_lsp.engine._injected:2 imports forge_lsp.server.server:") for v in found)
    assert (
        "forge_lsp.server.features._injected:5 imports forge_lsp.agent.optimize: "
        "the server is an adapter over the use cases"
    ) in found
    assert len([v for v in found if "_injected" not in v]) == 0


# ----------------------------------------------------------------------------- no import cycles
def import_edges(mods: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the forge_lsp modules it imports, anywhere in it (in a function, under TYPE_CHECKING too). `from pkg
    import sub` of a submodule is an edge to `sub`, not to `pkg`'s own `__init__`."""
    known = set(mods)
    edges: dict[str, set[str]] = {}
    for name, (source, is_pkg) in mods.items():
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        out: set[str] = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name in known}
            elif isinstance(node, ast.ImportFrom):
                base = (
                    ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                    if node.level
                    else node.module or ""
                )
                subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known}
                out |= subs
                if len(subs) < len(node.names) and base in known:
                    out.add(base)
        edges[name] = out - {name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


@pytest.mark.integration
def test_no_import_cycles():
    """No module imports, however indirectly, one that imports it: the server's features take the server, and the
    composition root (`server/app.py`) puts them together; the wire's session (`server/session.py`) joins framing
    and envelope; the executor factory (`engine/executors.py`) joins the two executors."""
    assert cycles(import_edges(modules())) == []


@pytest.mark.integration
def test_a_new_import_cycle_is_found():
    """Not vacuous: the executor importing the Ray executor back (the cycle the factory module removed) is found, and
    `from . import submodule` inside a package is not taken for a cycle through the package."""
    mods = modules()
    executor, is_pkg = mods["forge_lsp.engine.executor"]
    mods["forge_lsp.engine.executor"] = (
        executor + "\n\ndef _f():\n    from .ray_executor import RayExecutor\n",
        is_pkg,
    )
    found = cycles(import_edges(mods))
    assert ["forge_lsp.engine.executor", "forge_lsp.engine.ray_executor"] in found, found
    assert not any("forge_lsp.engine" in c for c in found)  # the package's __init__ and its submodules: no cycle


@pytest.mark.integration
def test_the_server_reaching_for_a_feature_is_caught_as_a_layer_and_as_a_cycle():
    """Not vacuous: `server.py` importing a feature (the central code-lens handler of old, which knew each feature) is
    reported by the rule and closes a cycle; a feature importing the composition root is reported too."""
    mods = modules()
    source, is_pkg = mods["forge_lsp.server.server"]
    mods["forge_lsp.server.server"] = (source + "\n\ndef _lenses():\n    from .features import hotspots\n", is_pkg)
    mods["forge_lsp.server.features._injected"] = ("def g():\n    from ..app import FEATURES\n", False)
    found = violations(mods)
    assert any(
        v.startswith("forge_lsp.server.server:")
        and v.endswith("imports forge_lsp.server.features.hotspots: " + RULES[-2].name)
        for v in found
    ), found
    assert f"forge_lsp.server.features._injected:2 imports forge_lsp.server.app: {RULES[-1].name}" in found
    assert any(
        {"forge_lsp.server.server", "forge_lsp.server.features.hotspots"} <= set(c) for c in cycles(import_edges(mods))
    )
