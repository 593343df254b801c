"""Optimize, Profile and Explain on each `nn.Module` class and CUDA kernel: their lenses, code actions and commands
(`forge.optimize`, `forge.profile`, `forge.explain`), each starting the job of that kind (`jobs.start`). A run whose
file changed while it went on leaves a "re-run" lens on its class."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as t

from ..feature import Unit, command_action, file_entry, lens, module_at
from ..protocol import TargetArgs, positional, wire
from ..server import ForgeServer
from . import jobs


def register(ls: ForgeServer) -> None:
    @ls.command("forge.optimize")
    def optimize(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(TargetArgs, args)
        return wire(jobs.start(ls, "optimize", a.uri, a.name))

    @ls.command("forge.profile")
    def profile(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(TargetArgs, args)
        return wire(jobs.start(ls, "profile", a.uri, a.name))

    @ls.command("forge.explain")
    def explain(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(TargetArgs, args)
        return wire(jobs.start(ls, "explain", a.uri, a.name))


def code_lenses(ls: ForgeServer, uri: str) -> list[t.CodeLens]:
    entry = file_entry(ls, uri)
    if entry is None:
        return []
    lenses: list[t.CodeLens] = []
    for m in entry.modules:
        if (uri, m.name) in ls.state.stale_runs and (uri, m.name) not in ls.state.proposals:
            # the last run ended on an edited file: nothing to accept, say why and offer the re-run
            lenses.append(
                lens(m.line, "forge: re-run — the file changed during the run", "forge.optimize", [uri, m.name])
            )
        lenses += [
            lens(m.line, f"Optimize {m.name}", "forge.optimize", [uri, m.name]),
            lens(m.line, "Profile", "forge.profile", [uri, m.name]),
            lens(m.line, "Explain bottleneck", "forge.explain", [uri, m.name]),
        ]
    for k in entry.kernels:
        lenses += [
            lens(k.line, "Explain NCU bottleneck", "forge.explain", [uri, k.name]),
            lens(k.line, "Profile kernel", "forge.profile", [uri, k.name]),
        ]
    return lenses


def code_actions(ls: ForgeServer, params: t.CodeActionParams) -> list[t.CodeAction]:
    uri = params.text_document.uri
    entry = file_entry(ls, uri)
    if entry is None:
        return []
    line = params.range.start.line
    module = module_at(entry, line)
    if module is not None:
        name = module.name
        return [
            command_action(f"Optimize `{name}`", "forge.optimize", [uri, name]),
            command_action(f"Profile `{name}`", "forge.profile", [uri, name]),
            command_action(f"Explain bottleneck of `{name}`", "forge.explain", [uri, name]),
        ]
    kernel = next((k for k in entry.kernels if k.line == line), None)
    if kernel is None:
        return []
    return [
        command_action("Explain NCU bottleneck", "forge.explain", [uri, kernel.name]),
        command_action(f"Profile kernel `{kernel.name}`", "forge.profile", [uri, kernel.name]),
    ]


FEATURE = Unit("targets", register, code_lenses=code_lenses, code_actions=code_actions)
