"""forge's prompt templates (the ``*.j2`` files here), installed as the package ``forge_lsp.prompts``.

pyproject.toml maps this folder into the package; forge reads the templates with
``importlib.resources.files("forge_lsp.prompts")`` (see ``forge_lsp/agent/roles.py``).
"""
