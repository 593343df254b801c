"""Kernel signatures read from CUDA source text: the ``__global__`` functions a source declares
(:func:`kernel_names`) and one kernel's parameter list (:func:`parse_kernel_params`), with template type
arguments substituted and each parameter's canonical kind, which the launcher marshals arguments by.
Pure text: comments and preprocessor lines are blanked first; nothing is compiled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from forge_lsp.runtime.errors import CudaCompileError

__all__ = ["KernelParam", "kernel_names", "not_found_message", "parse_kernel_params"]


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter as declared in the source.

    ``ctype`` is the declared type without qualifiers (``"float*"``, ``"long long"``), with
    template type parameters substituted; ``pointer`` says whether it is a pointer (or array);
    ``kind`` is the canonical element/value type (``"f32"``, ``"f64"``, ``"f16"``, ``"bf16"``,
    ``"bool"``, ``"i8"``...``"u64"``), or None for other types (structs, vector types, ``void``).
    """

    name: str
    ctype: str
    pointer: bool
    kind: str | None


_NAMED_KINDS = {
    "float": "f32",
    "double": "f64",
    "bool": "bool",
    "half": "f16",
    "__half": "f16",
    "__nv_bfloat16": "bf16",
    "nv_bfloat16": "bf16",
    "int8_t": "i8",
    "uint8_t": "u8",
    "int16_t": "i16",
    "uint16_t": "u16",
    "int32_t": "i32",
    "uint32_t": "u32",
    "int64_t": "i64",
    "uint64_t": "u64",
    "size_t": "u64",
    "ssize_t": "i64",
    "ptrdiff_t": "i64",
    "intptr_t": "i64",
    "uintptr_t": "u64",
}
_INTEGER_WORDS = frozenset({"signed", "unsigned", "char", "short", "int", "long"})
_TYPE_WORDS = _INTEGER_WORDS | {"float", "double", "bool", "void"}
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict|__grid_constant__|struct|class)\b")
_ATTRIBUTE_CALLS = frozenset(
    {"__launch_bounds__", "__cluster_dims__", "__maxnreg__", "__attribute__", "__declspec", "alignas"}
)
_COMMENT_OR_LITERAL = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_PREPROCESSOR_LINE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_OPENERS = {"(": ")", "<": ">", "[": "]", "{": "}"}


@dataclass(frozen=True)
class _Signature:
    name: str
    params: str
    template: str | None


def _strip_code(source: str) -> str:
    """Source with comments blanked (line structure kept) and preprocessor lines removed."""

    def blank(m: re.Match[str]) -> str:
        text = m.group()
        return text if text[0] in "\"'" else re.sub(r"[^\n]", " ", text)

    return _PREPROCESSOR_LINE.sub("", _COMMENT_OR_LITERAL.sub(blank, source))


def _closing(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``text[start]``, or -1 if unbalanced."""
    stack = [_OPENERS[text[start]]]
    for i in range(start + 1, len(text)):
        ch = text[i]
        if ch in "([{":
            stack.append(_OPENERS[ch])
        elif ch in ")]}":
            if ch != stack.pop():
                return -1
            if not stack:
                return i
    return -1


def _split_top_level(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside (), [], {} and <> nesting."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _signature_at(text: str, start: int) -> _Signature | None:
    """The kernel declared by the ``__global__`` ending at ``start``, or None if it cannot be read."""
    i = start
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if text.startswith("[[", i):
            i = text.find("]]", i)
            if i < 0:
                return None
            i += 2
            continue
        ident = _IDENT.match(text, i)
        if ident is None:
            return None
        i = ident.end()
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "(":
            close = _closing(text, i)
            if close < 0:
                return None
            if ident.group() in _ATTRIBUTE_CALLS:
                i = close + 1
                continue
            return _Signature(ident.group(), text[i + 1 : close], _template_before(text, start))
    return None


def _template_before(text: str, global_start: int) -> str | None:
    """The parameter list of a ``template<...>`` heading the declaration that contains ``__global__``."""
    head_start = max(text.rfind(ch, 0, global_start) for ch in ";{}") + 1
    head = text[head_start:global_start]
    match = re.search(r"\btemplate\s*<(.*)>[\w\s\"]*__global__$", head, re.S)
    return match.group(1) if match else None


def _signatures(source: str) -> list[_Signature]:
    text = _strip_code(source)
    found = (_signature_at(text, m.end()) for m in re.finditer(r"\b__global__\b", text))
    return [sig for sig in found if sig is not None]


def kernel_names(source: str) -> list[str]:
    """Names of the ``__global__`` functions declared in ``source``, in order, without repeats."""
    return list(dict.fromkeys(sig.name for sig in _signatures(source)))


def _template_types(template: str | None, name: str) -> dict[str, str]:
    """Map template type parameters to the arguments in ``name`` (``k<float, 4>``) or their defaults."""
    if template is None or "<" not in name:
        return {}
    args = [a.strip() for a in _split_top_level(name[name.index("<") + 1 : name.rindex(">")], ",")]
    mapping = {}
    for i, param in enumerate(_split_top_level(template, ",")):
        match = re.fullmatch(r"\s*(?:typename|class)\s+([A-Za-z_]\w*)\s*(?:=\s*(.+?))?\s*", param, re.S)
        if match is None:
            continue
        if i < len(args) and args[i]:
            mapping[match.group(1)] = args[i]
        elif match.group(2):
            mapping[match.group(1)] = match.group(2)
    return mapping


def _kind(words: list[str]) -> str | None:
    """Canonical kind of a type spelled by ``words`` (qualifiers removed), or None if unsupported."""
    words = [w.removeprefix("std::") for w in words]
    if len(words) == 1 and words[0] in _NAMED_KINDS:
        return _NAMED_KINDS[words[0]]
    if not words or not set(words) <= _INTEGER_WORDS:
        return None
    if "char" in words:
        bits = 8
    elif "short" in words:
        bits = 16
    elif "long" in words:
        bits = 64  # LP64: long and long long are 64-bit on the Linux hosts CUDA runs on
    else:
        bits = 32
    return f"{'u' if 'unsigned' in words else 'i'}{bits}"


def _parse_param(text: str, index: int, types: dict[str, str]) -> KernelParam:
    decl = _split_top_level(text, "=")[0]
    decl = re.sub(r"\[[^\]]*\]", "*", decl)  # `float x[]` is a pointer
    for template_name, actual in types.items():
        decl = re.sub(rf"\b{re.escape(template_name)}\b", actual, decl)
    stars = decl.count("*")
    words = _QUALIFIERS.sub(" ", decl.replace("*", " ")).split()
    name = f"arg{index}"
    if len(words) > 1 and words[-1] not in _TYPE_WORDS and _IDENT.fullmatch(words[-1]):
        name = words.pop()
    reference = any("&" in w for w in words)
    words = [w.replace("&", "") for w in words if w.replace("&", "")]
    ctype = " ".join(words) + "*" * stars + ("&" if reference else "")
    return KernelParam(name=name, ctype=ctype, pointer=stars > 0, kind=None if reference else _kind(words))


def parse_kernel_params(source: str, name: str) -> tuple[KernelParam, ...]:
    """Parameters of kernel ``name`` (``"k"`` or a template instance ``"k<float>"``) in ``source``.

    Raises ``CudaCompileError`` listing the ``__global__`` functions present when ``name`` is not one.
    """
    base = name.split("<", 1)[0].strip()
    signatures = _signatures(source)
    for sig in signatures:
        if sig.name == base:
            if sig.params.strip() in ("", "void"):
                return ()
            types = _template_types(sig.template, name)
            return tuple(_parse_param(p, i, types) for i, p in enumerate(_split_top_level(sig.params, ",")))
    names = list(dict.fromkeys(sig.name for sig in signatures))
    raise CudaCompileError(not_found_message(name, names), kernel_name=name)


def not_found_message(name: str, names: list[str]) -> str:
    """Says that kernel ``name`` is not among the ``__global__`` functions ``names`` of a source."""
    found = ", ".join(names) if names else "none"
    return f"kernel '{name}' is not a __global__ function of the source (__global__ functions found: {found})"
