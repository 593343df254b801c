"""How forge says its figures, the same way in every front end and report: one format for a ratio ("1.42×",
"470×"), a speedup said as what it is ("2.27× slower", never "0.44x"), and a timed comparison said with what its
interval decides. Pure text; no torch, no engine."""

from __future__ import annotations


def times(x: float) -> str:
    """A ratio in the one format used everywhere: "1.42×", "0.73×", "470×" (two decimals below 10)."""
    return f"{x:.0f}×" if x >= 9.995 else f"{x:.2f}×"


def speedup_words(x: float) -> str:
    """A speedup said as what it is: "1.42× faster", "2.27× slower" for 0.44, "470× slower" for 0.0021 (never
    "0.00x"), "as fast" within half a percent."""
    if x <= 0:
        return "not measured"
    if abs(x - 1.0) < 0.005:
        return "as fast as the reference"
    return f"{times(x)} faster" if x > 1 else f"{times(1 / x)} slower"


def interval_words(x: float, lo: float, hi: float, level: str = "95%") -> str:
    """What a timed speedup's interval decides, in words: "1.42× faster" only when the whole interval is above 1,
    "1.09× slower" only when it is all below, else "not decided: the 95% interval spans 1" (never a speedup claimed
    from its median alone)."""
    if lo > 1 or hi < 1:
        return speedup_words(x)
    return f"not decided: the {level} interval spans 1"
