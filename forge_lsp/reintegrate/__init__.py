"""Reintegration: a verified candidate written back into the user's module.

`rewrite_module` turns the user's class into a guarded, weight-sharing rewrite (same name,
constructor and `state_dict` keys; the original forward kept for inputs outside what was
verified) and `revert_module` undoes it exactly. Pure text in, text out: no torch, no engine.
"""

from .domain import VerifiedDomain, domain_from_verdict
from .result import Rewrite, RewriteError
from .rewrite import revert_module, rewrite_module, source_fingerprint

__all__ = [
    "Rewrite",
    "RewriteError",
    "VerifiedDomain",
    "domain_from_verdict",
    "revert_module",
    "rewrite_module",
    "source_fingerprint",
]
