"""The Coder and Judge roles: prompt rendering (Jinja2 templates from `prompts/`) and reply types.

Templates are data. They are looked up in order in: the workspace's ``.forge/prompts/``,
``$FORGE_PROMPTS_DIR``, and the project's ``prompts/``. Rendering is undefined-strict, so a
template naming a variable the agent does not pass fails loudly. Each role returns the
messages for one chat call; the provider parses the reply into the pydantic type named here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, Field

#: The project's own templates (next to the package in a source checkout or editable install).
DEFAULT_PROMPTS = Path(__file__).resolve().parents[2] / "prompts"


class CoderReply(BaseModel):
    summary: str = Field(description="one line: what changed and why")
    source: str = Field(description="the complete Python module defining ModelNew")


class RepairAdvice(BaseModel):
    critical_issue: str
    fix: str


class OptimizeAdvice(BaseModel):
    bottleneck: str
    method: str
    plan: str


class Prompts:
    """Renders the role templates, with per-workspace overrides."""

    def __init__(self, workspace: Path | None = None, extra_dirs: list[Path] | None = None):
        dirs = [*(extra_dirs or [])]
        if workspace is not None:
            dirs.append(Path(workspace) / ".forge" / "prompts")
        if os.environ.get("FORGE_PROMPTS_DIR"):
            dirs.append(Path(os.environ["FORGE_PROMPTS_DIR"]))
        dirs.append(DEFAULT_PROMPTS)
        self.dirs = [d for d in dirs if d.is_dir()]
        if DEFAULT_PROMPTS not in self.dirs:
            raise FileNotFoundError(f"forge's prompt templates are missing: {DEFAULT_PROMPTS}")
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([str(d) for d in self.dirs]),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
        )  # noqa: S701 - prompts are plain text, not HTML

    def render(self, name: str, **context: Any) -> str:
        return self.env.get_template(name).render(**context).strip() + "\n"

    def source_of(self, name: str) -> Path:
        """The file a template is read from (which override won)."""
        for d in self.dirs:
            if (d / name).is_file():
                return d / name
        raise FileNotFoundError(name)


def _common(task_ctx: dict[str, Any]) -> dict[str, Any]:
    base = {
        "model_class": "Model",
        "vary": [],
        "device_name": "the GPU",
        "device_type": "cuda",
        "peaks": None,
        "task_path": "",
        "reference_source": "",
        "inputs": [],
    }
    return base | task_ctx


def coder_messages(
    prompts: Prompts,
    task_ctx: dict[str, Any],
    *,
    parent: dict[str, Any] | None,
    instruction: str | None,
    failed_siblings: list[dict[str, str]],
    examples: list[str],
) -> list[dict[str, str]]:
    ctx = _common(task_ctx) | {
        "parent": parent,
        "instruction": instruction,
        "failed_siblings": failed_siblings,
        "examples": examples,
    }
    return [
        {"role": "system", "content": prompts.render("coder_system.j2", **ctx)},
        {"role": "user", "content": prompts.render("coder.j2", **ctx)},
    ]


def judge_repair_messages(
    prompts: Prompts, task_ctx: dict[str, Any], *, candidate: dict[str, Any], verdict: dict[str, Any]
) -> list[dict[str, str]]:
    ctx = _common(task_ctx) | {"mode": "repair", "candidate": candidate, "verdict": verdict}
    return [
        {"role": "system", "content": prompts.render("judge_system.j2", **ctx)},
        {"role": "user", "content": prompts.render("judge_repair.j2", **ctx)},
    ]


def judge_optimize_messages(
    prompts: Prompts,
    task_ctx: dict[str, Any],
    *,
    candidate: dict[str, Any],
    timing: dict[str, Any] | None,
    roofline: dict[str, Any] | None,
    findings: list[dict[str, Any]],
    tried: list[dict[str, str]],
    profiled_on: str | None = None,
) -> list[dict[str, str]]:
    ctx = _common(task_ctx) | {
        "mode": "optimize",
        "candidate": candidate,
        "timing": timing,
        "roofline": roofline,
        "findings": findings,
        "tried": tried,
        "profiled_on": profiled_on,
    }
    return [
        {"role": "system", "content": prompts.render("judge_system.j2", **ctx)},
        {"role": "user", "content": prompts.render("judge_optimize.j2", **ctx)},
    ]


def instruction_from(advice: RepairAdvice | OptimizeAdvice) -> str:
    """The Judge's advice as the Coder's instruction."""
    if isinstance(advice, RepairAdvice):
        return f"Fix this problem: {advice.critical_issue}\nMinimal fix: {advice.fix}"
    return f"Bottleneck: {advice.bottleneck}\nMethod: {advice.method}\nPlan: {advice.plan}"
