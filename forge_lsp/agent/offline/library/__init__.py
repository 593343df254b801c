"""Hand-written Triton kernels inlined into offline library candidates.

These files are read as TEXT by `forge_lsp.agent.offline.generate` and pasted into candidate
sources (which run only inside engine workers); the caller never imports them. Each kernel
file starts with a block between ``# forge:dev-only-begin`` and ``# forge:dev-only-end`` that
imports the shared helpers of ``common.py`` for linting and direct tests; the generator drops
it, since ``common.py`` is inlined first.
"""
