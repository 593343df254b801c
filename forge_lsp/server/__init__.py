"""The language server (the only package that may import pygls/lsprotocol)."""
