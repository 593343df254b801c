"""Code that runs inside worker processes only: loading, comparing, checking, timing.

Nothing here is imported by the engine's caller; `forge_lsp.engine.worker` drives it.
"""
