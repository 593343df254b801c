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
    training: bool | None = True
    """Module mode during verification (the engine verifies modules as constructed: training).
    Checked only for modules whose output depends on it; None: never checked."""

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
    ) -> VerifiedDomain:
        """E.g. ``VerifiedDomain.for_device("cuda:0", "float32", [2])``."""
        dts = [dtypes] if isinstance(dtypes, str) else list(dtypes)
        return cls(device_types=[device_type], dtypes=dts, ranks=list(ranks), contiguous=contiguous, training=training)

    def describe(self) -> str:
        ranks = ", ".join(map(str, self.ranks))
        parts = ["/".join(self.device_types), "/".join(self.dtypes), f"ranks [{ranks}]"]
        if self.contiguous:
            parts.append("contiguous")
        parts.append("no autograd")
        return ", ".join(parts)


def domain_from_verdict(verdict: Verdict) -> VerifiedDomain:
    """What a verdict covered: its device type, the dtypes of its tensor inputs, each input's rank (first
    input set), and whether all inputs were contiguous. The guard of a rewrite admits exactly this."""
    specs = verdict.inputs
    first = specs[0].case if specs else None
    return VerifiedDomain(
        device_types=[(verdict.device or "cpu").split(":")[0]],
        dtypes=sorted({s.dtype for s in specs if s.dtype}),
        ranks=[len(s.shape) for s in specs if s.case == first and s.shape is not None],
        contiguous=all(s.contiguous is not False for s in specs if s.dtype),
    )
