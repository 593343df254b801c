"""The verified domain: the inputs a candidate was verified on, as a rewrite's guard checks them,
and its derivation from an engine verdict."""

from __future__ import annotations

import re

from pydantic import BaseModel, field_validator

from ..engine.verdict import Verdict

#: dtype names accepted in a VerifiedDomain (torch attribute names).
DTYPES = frozenset(
    {
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "complex32",
        "complex64",
        "complex128",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
    }
)
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32"}


class VerifiedDomain(BaseModel):
    """The inputs a candidate was verified on, as the guard checks them ("shape class": rank)."""

    device_types: list[str]
    dtypes: list[str]
    ranks: list[int]
    contiguous: bool = True
    sizes: list[list[list[int] | None]] | None = None
    """For each tensor argument, for each dimension, the sizes verified there; None: any size (a dimension
    verified at three or more sizes, an odd one among them). None for the whole field: not restricted."""
    training: bool | None = True
    """Module mode during verification (the engine verifies modules as constructed: training).
    Checked only for modules whose output depends on it; None: never checked."""
    default_stream: bool = False
    """CUDA: verified on the device's default stream only (kernels launched on the legacy default stream): a
    call made on a side stream, or while a CUDA graph is being captured, runs the original."""

    @field_validator("device_types")
    @classmethod
    def _devices(cls, v: list[str]) -> list[str]:
        out = []
        for d in v:
            t = d.split(":", 1)[0].strip()
            if not re.fullmatch(r"[a-z_]+", t):
                raise ValueError(f"not a device type: {d!r}")
            if t not in out:
                out.append(t)
        if not out:
            raise ValueError("device_types must name at least one device type")
        return out

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, v: list[str]) -> list[str]:
        out = []
        for d in v:
            name = d.removeprefix("torch.")
            name = _DTYPE_ALIASES.get(name, name)
            if name not in DTYPES:
                raise ValueError(f"unknown dtype {d!r} (expected torch dtype names such as float32)")
            if name not in out:
                out.append(name)
        if not out:
            raise ValueError("dtypes must name at least one dtype")
        return out

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, v: list[int]) -> list[int]:
        if any(r < 0 for r in v):
            raise ValueError("ranks are tensor dimensions counts (>= 0)")
        return v

    @classmethod
    def for_device(
        cls,
        device_type: str,
        dtypes: list[str] | str,
        ranks: list[int],
        *,
        contiguous: bool = True,
        training: bool | None = True,
        default_stream: bool = False,
    ) -> VerifiedDomain:
        """E.g. ``VerifiedDomain.for_device("cuda:0", "float32", [2])``."""
        dts = [dtypes] if isinstance(dtypes, str) else list(dtypes)
        return cls(
            device_types=[device_type],
            dtypes=dts,
            ranks=list(ranks),
            contiguous=contiguous,
            training=training,
            default_stream=default_stream,
        )

    def describe(self) -> str:
        ranks = ", ".join(map(str, self.ranks))
        parts = ["/".join(self.device_types), "/".join(self.dtypes), f"ranks [{ranks}]"]
        if self.sizes is not None:
            shown = [
                "(" + ", ".join("any" if s is None else "|".join(map(str, s)) for s in arg) + ")" for arg in self.sizes
            ]
            parts.append("sizes " + " ".join(shown))
        parts.append("contiguous" if self.contiguous else "any layout")
        if self.default_stream:
            parts.append("the default stream only (no side stream, no CUDA-graph capture)")
        parts.append("no autograd")
        return ", ".join(parts)


def domain_from_verdict(verdict: Verdict) -> VerifiedDomain:
    """What a verdict covered: its device type, the dtypes of its tensor inputs, each input's rank (first
    input set), the sizes verified, and its layouts and streams (`Verdict.domain`): contiguous inputs only
    unless it was verified on any layout, and the device's default stream only when that is all it was right on.
    A verdict without a domain (older runs) requires contiguous inputs and no stream. The guard of a rewrite
    admits exactly this."""
    specs = verdict.inputs
    first = specs[0].case if specs else None
    ranks = [len(s.shape) for s in specs if s.case == first and s.shape is not None]
    dtypes = sorted({s.dtype for s in specs if s.dtype})
    d = verdict.domain
    return VerifiedDomain(
        device_types=[(verdict.device or "cpu").split(":")[0]],
        dtypes=dtypes or (list(d.dtypes) if d is not None else []),
        ranks=ranks,
        contiguous=(d.layouts != "any" if d is not None else all(s.contiguous is not False for s in specs if s.dtype)),
        sizes=verified_sizes(verdict, len(ranks)),
        default_stream=d is not None and d.streams == "default",
    )


#: A dimension verified at this many sizes (an odd one among them) takes any size.
GENERAL_AFTER = 3


def verified_sizes(verdict: Verdict, n_tensors: int) -> list[list[list[int] | None]] | None:
    """Per tensor argument (in order) and dimension: the sizes the verdict verified, or None where the
    dimension was verified at `GENERAL_AFTER` or more sizes including an odd one (no sign of a hard-coded
    size there). None when the verdict's input sets do not agree on the arguments' ranks."""
    by_case: dict[str, list[list[int]]] = {}
    for spec in verdict.inputs:
        if spec.shape is not None:
            by_case.setdefault(spec.case, []).append(spec.shape)
    shapes = list(by_case.values())
    if not shapes or any(len(s) != n_tensors for s in shapes):
        return None
    out: list[list[list[int] | None]] = []
    for arg in range(n_tensors):
        rank = len(shapes[0][arg])
        if any(len(s[arg]) != rank for s in shapes):
            return None
        dims: list[list[int] | None] = []
        for d in range(rank):
            seen = sorted({s[arg][d] for s in shapes})
            general = len(seen) >= GENERAL_AFTER and any(v % 2 for v in seen)
            dims.append(None if general else seen)
        out.append(dims)
    return out
