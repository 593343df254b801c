"""compute-sanitizer over one call of a candidate: races, bad memory accesses, uninitialized reads.

The final acceptance of a candidate on CUDA (`forge eval --sanitize`, the agent's final re-check of
its best candidate, and so the editor's Accept, which only offers a re-checked answer) runs the
candidate once, on the smallest input set the task verifies, under NVIDIA's compute-sanitizer with
each of `racecheck`, `memcheck` and `initcheck`, in a sandboxed child process
(``python -m forge_lsp.engine.harness.sanitize_target REQUEST.json``). Findings in the candidate's kernels become a
failed `sanitizer` check naming the tool, the kernel and the source line; findings in torch's own
kernels are left out. Without compute-sanitizer the check says it was not run, and why.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..child import ChildRequest
from ..sandbox import child_env, default_cache_dir, run_sandboxed
from .candidate import Candidate
from .task import Task
from .verdict import Check

TOOLS = ("racecheck", "memcheck", "initcheck")
TARGET = "forge_lsp.engine.harness.sanitize_target"
_BLOCK_START = re.compile(r"^=+ (?=\S)(?P<what>.*)$")  # an error's first line; its details are indented
_LOCATION = re.compile(r"(?P<file>[^\s:()]+\.(?:cu|cuh|cpp|cc|c|py)):(?P<line>\d+)")
_KERNEL = re.compile(r"(?:^|\s)(?P<kernel>[A-Za-z_][\w:]*)(?:<[^()]*>)?\(")
#: Kernels of torch and its libraries: findings there are not the candidate's.
_TORCH_KERNEL = re.compile(r"\bat::|\bc10::|cub::|cutlass|cublas|cudnn|at_cuda_detail")
_NOT_AN_ERROR = (
    "COMPUTE-SANITIZER",
    "ERROR SUMMARY",
    "RACECHECK SUMMARY",
    "LEAK SUMMARY",
    "Program hit",
    "Target application returned",
)


class SanitizeRequest(ChildRequest):
    """What the sanitized child (`harness/sanitize_target.py`) calls once: the candidate, on the task's inputs."""

    task: Task
    candidate: Candidate


@dataclass
class Finding:
    tool: str
    what: str  # e.g. "Race reported between Write access at ... and Read access at ..."
    kernel: str = ""
    file: str = ""
    line: int | None = None

    def describe(self) -> str:
        where = f" in {self.kernel}" if self.kernel else ""
        loc = f" at {self.file}:{self.line}" if self.file and self.line else ""
        return f"{self.tool}: {self.what}{where}{loc}"


@dataclass
class SanitizerReport:
    available: bool
    findings: list[Finding] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cancelled: bool = False  # the caller's cancel killed the tool in flight

    def check(self) -> Check:
        if not self.available or not (self.seconds or self.findings):  # not run: the notes say why
            return Check(name="sanitizer", passed=True, detail="; ".join(self.notes))
        if self.findings:
            shown = "; ".join(f.describe() for f in self.findings[:3])
            more = f" (+{len(self.findings) - 3} more)" if len(self.findings) > 3 else ""
            return Check(name="sanitizer", passed=False, detail=f"compute-sanitizer found {shown}{more}")
        spent = ", ".join(f"{t} {s:.1f} s" for t, s in self.seconds.items())
        return Check(
            name="sanitizer", passed=True, detail=f"no finding ({spent})" + "".join(f"; {n}" for n in self.notes)
        )


def find_sanitizer() -> str | None:
    return shutil.which("compute-sanitizer") or next(
        (str(p) for p in Path("/usr/local/cuda/bin").glob("compute-sanitizer") if p.is_file()), None
    )


def parse(tool: str, output: str) -> list[Finding]:
    """The candidate's findings in compute-sanitizer's text output: one per error block (a line right after
    the `=====` prefix, then its indented details), torch's own kernels and host-API notes left out."""
    blocks: list[list[str]] = []
    for line in output.splitlines():
        if not line.startswith("="):
            continue
        start = _BLOCK_START.match(line)
        if start:
            blocks.append([start["what"].strip()])
        elif blocks:
            blocks[-1].append(line.lstrip("= ").strip())
    findings = []
    for block in blocks:
        what, text = block[0], "\n".join(block)
        if what.startswith(_NOT_AN_ERROR) or _TORCH_KERNEL.search(text):
            continue
        loc = _LOCATION.search(text)
        kernel = next((m["kernel"] for m in _KERNEL.finditer(text)), "")
        findings.append(
            Finding(
                tool=tool,
                what=what,
                kernel=kernel,
                file=loc["file"] if loc else "",
                line=int(loc["line"]) if loc else None,
            )
        )
    return findings


#: What brings a kernel (or code that could bring one) into a candidate: kernel source or a kernel backend, a
#: kernel loader (CUDA driver/runtime, CuPy, ctypes, jiterator), or code built at run time (the builtins exec, eval
#: and compile; not methods of those names such as `module.eval()` or `torch.compile`). A candidate with none of these
#: is PyTorch calls only.
_OWN_KERNEL = re.compile(
    r"__global__|\bcuda_sources\b|\bload_inline\b|\bcpp_extension\b|\btriton\b|forge_lsp\.runtime|compile_kernel"
    r"|\bcupy\b|\bRawKernel\b|\bRawModule\b|\bctypes\b|\bcffi\b|\bnumba\b|\bjiterator\b|cuModuleLoad|cuLaunch"
    r"|\bnvrtc\b|\bcuda\.bindings\b|\bcuda\.core\b|\bcuda\.cuda\b|\.cubin\b|\.ptx\b|\.so\b|torch\.ops\.load_library"
    r"|(?<![.\w])(?:exec|eval|compile)\s*\(|__import__|\bimportlib\b|\bmarshal\b|\bpickle\b|\bbase64\b"
    r"|\bcodecs\b|\bzlib\b|\bsubprocess\b|\bos\.system\b"
)


def own_kernels(source: str) -> bool:
    """Whether the candidate may launch kernels of its own: False only for a candidate made of PyTorch calls alone
    (the offline torch.compile candidates, a rewrite in torch ops), whose kernels are all torch's or its compiler's;
    compute-sanitizer has nothing of the candidate's to check there. Anything that brings a kernel, loads one, or
    builds code at run time counts (a guess from the text, erring towards running the tool)."""
    return _OWN_KERNEL.search(source) is not None


def sanitize(
    task: Task,
    candidate: Candidate,
    device: str,
    *,
    tools: tuple[str, ...] = TOOLS,
    timeout: float = 600.0,
    cache_dir: Path | None = None,
    python: str | None = None,
    cancel: threading.Event | None = None,
) -> SanitizerReport:
    """Run the candidate once under each tool; a report with the candidate's findings and the time each took.
    A candidate of PyTorch calls alone (`own_kernels`) is not run: the report says so. `cancel` kills the tool
    in flight (the report says `cancelled`)."""
    if not own_kernels(candidate.source):
        return SanitizerReport(
            available=True,
            notes=[
                "not run: the candidate is PyTorch calls only (no kernel source, kernel loader or code built at run "
                "time), so its kernels are torch's or torch.compile's, not its own"
            ],
        )
    exe = find_sanitizer()
    if exe is None:
        return SanitizerReport(
            available=False,
            notes=["not run: compute-sanitizer was not found (it ships with the CUDA toolkit: put its bin/ on PATH)"],
        )
    cache = Path(cache_dir or default_cache_dir())
    report = SanitizerReport(available=True)
    with tempfile.TemporaryDirectory(prefix="forge-sanitize-") as tmp:
        req = SanitizeRequest(task=task, candidate=candidate).write(Path(tmp) / "request.json")
        # a torch.compile candidate compiles in the sanitized process itself: inductor's pool of compile workers
        # would start one more process per core under the tool, to no use (they launch no kernel)
        env = child_env(device, cache, {"TORCHINDUCTOR_COMPILE_THREADS": "1"})
        for tool in tools:
            t0 = time.perf_counter()
            cmd = [exe, "--tool", tool, "--print-limit", "20", python or sys.executable, "-m", TARGET, str(req)]
            result = run_sandboxed(cmd, env=env, cwd=Path(tmp), timeout=timeout, cancel=cancel, excerpt=200_000)
            report.seconds[tool] = time.perf_counter() - t0
            if result.cancelled:
                report.cancelled = True
                return report
            if result.timed_out:
                report.notes.append(f"{tool} did not finish within {timeout:g} s")
                continue
            finished = "ERROR SUMMARY" in result.output or "RACECHECK SUMMARY" in result.output  # the tool's last word
            if not finished and result.returncode not in (0, None):
                last = next((ln.strip() for ln in reversed(result.output.splitlines()) if ln.strip()), "no output")
                report.notes.append(f"{tool} could not run the candidate (exit code {result.returncode}: {last[:240]})")
                continue
            report.findings += parse(tool, result.output)
    return report
