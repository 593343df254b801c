"""The Coder and Judge roles: prompt rendering (Jinja2 templates) and reply types.

Templates are data: the top-level ``prompts/`` folder of the repository, installed as the package
``forge_lsp.prompts`` (pyproject.toml maps the folder into the package, so a wheel carries them)
and read through ``importlib.resources``. A template is looked up in order in: the workspace's
``.forge/prompts/``, ``$FORGE_PROMPTS_DIR``, and forge's own. Rendering is undefined-strict, so
a template naming a variable the agent does not pass fails loudly. Each role returns the
messages for one chat call; the provider parses the reply into the pydantic type named here.
"""

from __future__ import annotations

import importlib.resources
import os
from collections.abc import Callable
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import jinja2
from jinja2.loaders import split_template_path
from pydantic import BaseModel, Field

#: The package that holds forge's own templates (the repository's ``prompts/`` folder).
PROMPTS_PACKAGE = "forge_lsp.prompts"

#: The repository root when forge is imported from a source checkout that was never installed
#: (``python -m pytest`` from the repository root on a machine where ``pip install -e .`` was not run).
_CHECKOUT = Path(__file__).resolve().parents[2]


def default_prompts() -> Traversable:
    """forge's own templates: ``importlib.resources.files("forge_lsp.prompts")``.

    Raises FileNotFoundError when they are missing (a wheel built without them)."""
    try:
        root: Traversable = importlib.resources.files(PROMPTS_PACKAGE)
    except ModuleNotFoundError:  # not installed: only a source checkout has them next to the package
        if not (_CHECKOUT / "pyproject.toml").is_file():
            raise FileNotFoundError(f"forge's prompt templates are missing: no package {PROMPTS_PACKAGE}") from None
        root = _CHECKOUT / "prompts"
    if not root.joinpath("coder.j2").is_file():
        raise FileNotFoundError(f"forge's prompt templates are missing: {root} (package {PROMPTS_PACKAGE})")
    return root


class _ResourceLoader(jinja2.BaseLoader):
    """Loads templates from an ``importlib.resources`` folder (on disk, or inside a zip)."""

    def __init__(self, root: Traversable):
        self.root = root

    def find(self, name: str) -> Traversable | None:
        item = self.root
        for piece in split_template_path(name):
            item = item.joinpath(piece)
        return item if item.is_file() else None

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        item = self.find(template)
        if item is None:
            raise jinja2.TemplateNotFound(template)
        text = item.read_text(encoding="utf-8")
        if isinstance(item, Path):  # a file on disk (wheel or editable install): reload it when it changes
            mtime = item.stat().st_mtime
            return text, str(item), lambda: item.is_file() and item.stat().st_mtime == mtime
        return text, str(item), lambda: True

    def list_templates(self) -> list[str]:
        return sorted(item.name for item in self.root.iterdir() if item.name.endswith(".j2"))


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
        #: the override folders that exist, first wins; forge's own templates come after them
        self.dirs = [d for d in dirs if d.is_dir()]
        self.default = default_prompts()
        self._default_loader = _ResourceLoader(self.default)
        self.env = jinja2.Environment(
            loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader([str(d) for d in self.dirs]), self._default_loader]),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
        )  # noqa: S701 - prompts are plain text, not HTML

    def render(self, name: str, **context: Any) -> str:
        return self.env.get_template(name).render(**context).strip() + "\n"

    def source_of(self, name: str) -> Path | Traversable:
        """The file a template is read from (which override won)."""
        for d in self.dirs:
            if (d / name).is_file():
                return d / name
        found = self._default_loader.find(name)
        if found is None:
            raise FileNotFoundError(name)
        return found


def _common(task_ctx: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
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


def instruction_from(advice: RepairAdvice | OptimizeAdvice, prompts: Prompts | None = None) -> str:
    """The Judge's advice as the Coder's instruction (template ``instruction.j2``)."""
    mode = "repair" if isinstance(advice, RepairAdvice) else "optimize"
    template = (prompts or Prompts()).env.get_template("instruction.j2")
    return template.render(mode=mode, advice=advice).strip()
