"""What an extracted task's source may call (no torch here): small helpers the constructor source needs."""

from __future__ import annotations

from typing import Any


def with_attributes(obj: Any, attributes: dict[str, Any]) -> Any:
    """`obj` with `attributes` set: a configuration's private settings that its ``to_dict()`` leaves out (which
    attention implementation a Hugging Face config chose, for one). One that cannot be set is left as it is."""
    for name, value in attributes.items():
        try:
            setattr(obj, name, value)
        except (AttributeError, TypeError, ValueError):
            pass
    return obj
