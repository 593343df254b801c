"""Hover on a module or kernel: last measured numbers, with the run and their age; stale ones marked. A hot class of
the latest hot-spot report shows its share of the model's time first."""

from __future__ import annotations

import time

from lsprotocol import types as t

from ...agent.progress import speedup_label
from ..feature import Unit
from ..server import ForgeServer
from ..state import Result, text_sha
from . import hotspots


def register(ls: ForgeServer) -> None:
    @ls.feature(t.TEXT_DOCUMENT_HOVER)
    def hover(ls: ForgeServer, params: t.HoverParams) -> t.Hover | None:
        uri, line = params.text_document.uri, params.position.line
        hot = hotspots.hover_text(ls, uri, line)
        path = ls.path_of(uri)
        entry = ls.index.get(path) if path and ls.index is not None else None
        target = (
            next((m.name for m in entry.modules if m.line == line), None)
            or next((k.name for k in entry.kernels if k.line == line), None)
            if entry is not None
            else None
        ) or (hot[0] if hot else None)
        results = ls.state.result_for(uri, target) if target else []
        if not results and hot is None:
            return None
        text = ls.doc_text(uri) or ""
        parts = [hot[1]] if hot else []
        if results:
            parts.append(render(target or "", results, text_sha(text), header=hot is None))
        return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value="\n\n".join(parts)))


def render(target: str, results: list[Result], current_sha: str, header: bool = True) -> str:
    lines = [f"**forge: {target}**"] if header else []
    for r in sorted(results, key=lambda r: -r.when):
        age = _age(time.time() - r.when)
        stale = r.doc_sha != current_sha
        head = f"*{r.kind}*, {age} ago" + (f", run `{r.run_id}`" if r.run_id else "")
        if stale:
            head += " — **stale: the code changed since these numbers were measured**"
        if lines:
            lines.append("")
        lines.append(head)
        if r.reference_ms is not None and r.candidate_ms is not None:
            lines.append(
                f"- reference {_time(r.reference_ms)} → best candidate {_time(r.candidate_ms)} per call ({r.timing})"
            )
        if r.speedup is not None:
            lines.append(f"- best verified candidate: {speedup_label(r.speedup, r.search_speedup)} the reference")
        if r.latency_ms is not None:
            lines.append(f"- {_time(r.latency_ms)} per call" + (f" ({r.measured})" if r.measured else ""))
        if r.roofline_pct is not None:
            against = f", against the {r.peaks}" if r.peaks else ""
            lines.append(f"- roofline: {r.roofline_pct:.0f}% of the roof ({r.bound}-bound{against})")
        for f in r.findings[:3]:
            lines.append(f"- {f['title']}")
        for h in r.hot_lines[:1]:
            stall = f", mostly {h['stall']}" if h["stall"] else ""
            lines.append(f"- hottest line here: line {h['line']}, {h['stall_pct']:.0f}% of the sampled stalls{stall}")
        if r.stalls:
            lines.append(f"- stall reasons: {', '.join(r.stalls)}")
        if r.note and r.speedup is None and r.latency_ms is None:
            lines.append(f"- {r.note}")
    if len({r.kind for r in results}) > 1:
        lines += [
            "",
            "*Times from different runs measure different things (the reference alone, or the "
            "reference and a candidate timed together); compare numbers within one run.*",
        ]
    return "\n".join(lines)


def _time(ms: float) -> str:
    return f"{ms * 1000:.1f} µs" if ms < 1 else f"{ms:.3f} ms" if ms < 100 else f"{ms:.0f} ms"


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


FEATURE = Unit("hover", register)
