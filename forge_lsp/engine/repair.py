"""Automatic repairs: a candidate's source and its verdict in, a repaired source out, for causes that are known and
mechanical. Text only (no torch): every edit lands inside the candidate's own text, everything else kept byte for byte.

Three repairs (`RepairKind`):
- `current_stream`: kernel launches on the legacy default stream (`k<<<grid, block>>>(...)`, or a `0`/`nullptr`
  stream), `cudaMemset` and `cudaMemcpy` in the CUDA strings, moved to torch's current stream
  (`c10::cuda::getCurrentCUDAStream()`), with `#include <c10/cuda/CUDAStream.h>` where it is missing.
- `contiguous_inputs`: `ModelNew.forward` makes its tensor inputs contiguous before the kernels see them.
- `scalar_type`: the `Tensor::type()` forms current torch no longer compiles (`AT_DISPATCH_...(x.type(), ...)`,
  `x.type().scalarType()`, `x.type().is_cuda()`, `x.data<T>()`) rewritten to `scalar_type()` and `data_ptr<T>()`.

`repair_candidate` decides from the verdict which of them apply (see its docstring) and composes them.
"""

from __future__ import annotations

import ast
import codecs
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel

from ..parsing import parse
from .verdict import InputSpec, RepairKind, Status, Verdict

__all__ = [
    "CURRENT_STREAM",
    "Fix",
    "Repair",
    "StreamRewrite",
    "contiguous_inputs",
    "launch_on_current_stream",
    "repair_candidate",
    "rewrite_streams",
    "scalar_type_dispatch",
    "tensor_positions",
]

#: The stream every moved launch and copy goes on: torch's current stream on the current device.
CURRENT_STREAM = "c10::cuda::getCurrentCUDAStream()"
STREAM_HEADER = "c10/cuda/CUDAStream.h"
#: The comment put above the statements the contiguous repair adds (also how it knows it was applied).
CONTIGUOUS_MARK = "# forge repair: the kernels index the inputs as contiguous memory"

#: Stream arguments that mean the legacy default stream (compared with the whitespace taken out).
_LEGACY_STREAMS = frozenset(
    {
        "0",
        "0x0",
        "NULL",
        "nullptr",
        "cudaStreamDefault",
        "cudaStreamLegacy",
        "cudaStreamPerThread",
        "(cudaStream_t)0",
        "(cudaStream_t)NULL",
        "(cudaStream_t)nullptr",
        "at::cuda::getDefaultCUDAStream()",
        "c10::cuda::getDefaultCUDAStream()",
    }
)


class Fix(BaseModel):
    """One repair applied, and what it changed."""

    kind: RepairKind
    detail: str


class Repair(BaseModel):
    """A repaired candidate: its full source, the fixes in it, and the known limits they do not lift."""

    source: str
    fixes: list[Fix]
    remaining: list[str] = []

    @property
    def kinds(self) -> list[RepairKind]:
        return [f.kind for f in self.fixes]


# --- the Python text: string literals and their exact spans ----------------------------------------------------------


class _Lines:
    """Character offsets of a source's lines, for the AST's (line, UTF-8 byte column) positions."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", source)]
        first = re.search(r"\r\n|\r|\n", source)
        self.newline = first.group(0) if first else "\n"

    def line(self, lineno: int) -> str:
        start = self.starts[lineno - 1]
        end = self.starts[lineno] if lineno < len(self.starts) else len(self.source)
        return self.source[start:end]

    def offset(self, lineno: int, col: int) -> int:
        start = self.starts[lineno - 1]
        return start + len(self.line(lineno).encode("utf-8")[:col].decode("utf-8", errors="ignore"))

    def line_start(self, lineno: int) -> int:
        """Offset of line `lineno` (1-based); past the last line: the end of the source."""
        return self.starts[lineno - 1] if lineno <= len(self.starts) else len(self.source)


@dataclass
class _Piece:
    raw: bool
    triple: bool
    newline: str  # the newline a triple-quoted piece uses in the file


@dataclass
class _CString:
    """One string constant of the module, decoded, with each decoded character's span in the Python source."""

    text: str
    starts: list[int]
    ends: list[int]
    piece_of: list[int]
    pieces: list[_Piece]
    code: str = ""  # `text` with C/C++ comments and the contents of C string literals blanked out

    def insert_after(self, i: int) -> int:
        """Source offset just after decoded character i (inside its own literal)."""
        return self.ends[i]

    def span(self, s: int, e: int) -> tuple[int, int] | None:
        """Source span of decoded characters s..e-1, when they lie in one literal."""
        if s >= e or self.piece_of[s] != self.piece_of[e - 1]:
            return None
        return self.starts[s], self.ends[e - 1]

    def newline_in(self, i: int) -> str | None:
        """How to write a newline inside the literal holding decoded character i (None: it cannot hold one)."""
        piece = self.pieces[self.piece_of[i]]
        if piece.triple:
            return piece.newline
        return None if piece.raw else "\\n"


_STRING_START = re.compile(r"([rRbBuUfF]{0,2})('''|\"\"\"|'|\")")


def _literal_pieces(text: str, base: int) -> list[tuple[bool, bool, int, int, str]] | None:
    """The string literals of one (implicitly concatenated) string expression's text: (raw, triple, body start,
    body end, newline used) each, offsets plus `base`. None when it holds bytes or f-strings, or is not one."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\f\r\n":
            i += 1
            continue
        if c == "\\":  # a line continuation between the pieces
            i += 1
            continue
        if c == "#":
            while i < n and text[i] not in "\r\n":
                i += 1
            continue
        m = _STRING_START.match(text, i)
        if not m:
            return None
        prefix, quote = m.group(1).lower(), m.group(2)
        if "b" in prefix or "f" in prefix:
            return None
        j = m.end()
        while True:
            if j >= n:
                return None
            if text[j] == "\\":
                j += 2
                continue
            if text.startswith(quote, j):
                break
            j += 1
        body = text[m.end() : j]
        newline = "\r\n" if "\r\n" in body else "\n"
        out.append(("r" in prefix, len(quote) == 3, base + m.end(), base + j, newline))
        i = j + len(quote)
    return out


_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|[0-7]{1,3}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b"}
_SIMPLE_ESCAPES |= {"f": "\f", "v": "\v"}


def _decode_into(cs: _CString, chars: list[str], source: str, start: int, end: int, raw: bool, piece: int) -> None:
    """Append the decoded characters of one literal's body (`source[start:end]`) to `chars`, and their spans to `cs`."""

    def add(ch: str, s: int, e: int) -> None:
        chars.append(ch)
        cs.starts.append(s)
        cs.ends.append(e)
        cs.piece_of.append(piece)

    i = start
    while i < end:
        c = source[i]
        if c == "\r":  # the tokenizer reads \r\n and \r as \n
            j = i + 2 if source.startswith("\r\n", i) else i + 1
            add("\n", i, j)
            i = j
        elif c != "\\":
            add(c, i, i + 1)
            i += 1
        elif raw:  # the backslash and the character after it stay, both
            add(c, i, i + 1)
            if i + 1 < end:
                add(source[i + 1], i + 1, i + 2)
            i += 2
        elif source.startswith("\\\r\n", i):  # a continued line: nothing
            i += 3
        elif source[i + 1 : i + 2] in ("\n", "\r"):
            i += 2
        else:
            m = _ESCAPE.match(source, i)
            assert m is not None
            esc = m.group(1)
            if esc in _SIMPLE_ESCAPES:
                add(_SIMPLE_ESCAPES[esc], i, m.end())
            elif esc[0] in "xuUN01234567":
                add(codecs.decode(m.group(0), "unicode_escape"), i, m.end())
            else:  # an unknown escape stays as written: both characters, each its own
                add("\\", i, i + 1)
                add(source[i + 1], i + 1, i + 2)
            i = m.end()


def _statement_strings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are statements of their own (docstrings): never code."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def _string_constants(source: str, tree: ast.Module, lines: _Lines) -> Iterator[_CString]:
    """Every plain (non-f, non-bytes) string constant of the module that is not a statement, decoded, with its spans."""
    statements = _statement_strings(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in statements:
            continue
        if node.end_lineno is None or node.end_col_offset is None:
            continue
        start = lines.offset(node.lineno, node.col_offset)
        end = lines.offset(node.end_lineno, node.end_col_offset)
        pieces = _literal_pieces(source[start:end], start)
        if not pieces:
            continue
        cs = _CString("", [], [], [], [_Piece(raw, triple, nl) for raw, triple, _, _, nl in pieces])
        chars: list[str] = []
        for k, (raw, _triple, body_start, body_end, _nl) in enumerate(pieces):
            _decode_into(cs, chars, source, body_start, body_end, raw, k)
        cs.text = "".join(chars)
        if cs.text != node.value:  # not read the way Python reads it: leave it alone
            continue
        cs.code = _code_view(cs.text)
        yield cs


def _apply(source: str, edits: list[tuple[int, int, str]]) -> str:
    """Replace each (start, end) span of the source by its text; the spans do not overlap."""
    out = []
    last = 0
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1])):
        if start < last:
            continue  # overlapping an earlier edit: dropped
        out.append(source[last:start])
        out.append(text)
        last = end
    out.append(source[last:])
    return "".join(out)


# --- the C/C++ text --------------------------------------------------------------------------------------------------


def _code_view(text: str) -> str:
    """`text` with `//` and `/* */` comments and the contents of string and character literals turned into spaces
    (newlines kept): what is left is code, at the same offsets."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isdigit())):  # 1'000: a digit separator
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}


def _arguments(code: str, start: int, closer: str) -> tuple[list[tuple[int, int]], int] | None:
    """The comma-separated arguments from `start` up to the closer at bracket depth 0: `)` or the `>>>` of a
    launch. Each argument as its (first, last + 1) non-blank offsets; with the closer's offset. None if none."""
    args = []
    depth = 0
    arg_start = start
    i, n = start, len(code)
    while i < n:
        c = code[i]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            if depth == 0:
                if closer == ")" and c == ")":
                    args.append((arg_start, i))
                    return _trimmed(code, args), i
                return None
            depth -= 1
        elif c == ";" and depth == 0:
            return None
        elif c == "," and depth == 0:
            args.append((arg_start, i))
            arg_start = i + 1
        elif c == ">" and closer == ">>>" and depth == 0:
            run = i
            while run < n and code[run] == ">":
                run += 1
            if run - i >= 3:  # `T<N>>>>`: the last three close the launch
                close = run - 3
                args.append((arg_start, close))
                return _trimmed(code, args), close
            i = run
            continue
        i += 1
    return None


def _trimmed(code: str, args: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for s, e in args:
        while s < e and code[s].isspace():
            s += 1
        while e > s and code[e - 1].isspace():
            e -= 1
        out.append((s, e))
    return out


def _device_ranges(code: str) -> list[tuple[int, int]]:
    """Spans of the bodies of `__global__` and `__device__` functions: launches there are device-side."""
    ranges = []
    stack: list[tuple[int, bool]] = []
    last = -1
    for i, c in enumerate(code):
        if c == "{":
            header = code[last + 1 : i]
            stack.append((i, bool(re.search(r"\b__(global|device)__\b", header))))
            last = i
        elif c == "}":
            if stack:
                start, device = stack.pop()
                if device:
                    ranges.append((start, i))
            last = i
        elif c == ";":
            last = i
    return ranges


def _inside(ranges: list[tuple[int, int]], i: int) -> bool:
    return any(a < i < b for a, b in ranges)


def _is_cuda(text: str) -> bool:
    return "__global__" in text or "<<<" in text


def _is_cpp(text: str) -> bool:
    return _is_cuda(text) or bool(
        re.search(r"#\s*include|\btorch::|\bat::|\bAT_DISPATCH|\bTORCH_\w+|\bPYBIND11_MODULE|\bstd::", text)
    )


# --- current_stream --------------------------------------------------------------------------------------------------


@dataclass
class StreamRewrite:
    """What `rewrite_streams` did to a candidate's CUDA strings."""

    source: str
    launches: int = 0  # kernel launches moved to the current stream
    memsets: int = 0  # cudaMemset -> cudaMemsetAsync on it
    memcpys: int = 0  # cudaMemcpy -> cudaMemcpyAsync on it
    includes: int = 0  # `#include <c10/cuda/CUDAStream.h>` added (once per string)
    current: int = 0  # launches already on the current stream
    own_stream: list[str] = field(default_factory=list)  # stream expressions of their own, left as they are
    device_side: int = 0  # launches from device code (dynamic parallelism), left as they are
    unincludable: int = 0  # strings changed where the include could not be written (one-line raw strings)
    legacy_left: int = 0  # launches on the legacy stream in text that cannot be edited (f-strings)

    @property
    def changed(self) -> int:
        return self.launches + self.memsets + self.memcpys

    def describe(self) -> str:
        parts = []
        if self.launches:
            parts.append(
                f"{_n(self.launches, 'kernel launch', 'kernel launches')} moved to the current stream ({CURRENT_STREAM})"
            )
        if self.memsets:
            parts.append(f"{_n(self.memsets, 'cudaMemset')} made cudaMemsetAsync on the current stream")
        if self.memcpys:
            parts.append(f"{_n(self.memcpys, 'cudaMemcpy')} made cudaMemcpyAsync on the current stream")
        if self.includes:
            parts.append(f"#include <{STREAM_HEADER}> added")
        return "; ".join(parts)


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


_MEMCALL = re.compile(r"(?<![\w.])cudaMem(set|cpy)\s*\(")
_INCLUDE_LINE = re.compile(r"^[ \t]*#[ \t]*include\b[^\n]*", re.MULTILINE)
_HAS_STREAM_HEADER = re.compile(r"#\s*include\s*[<\"]" + re.escape(STREAM_HEADER) + r"[>\"]")


def _stream_edits(cs: _CString, result: StreamRewrite) -> list[tuple[int, int, str]]:
    code = cs.code
    device = _device_ranges(code)
    edits: list[tuple[int, int, str]] = []
    changed = 0
    for m in re.finditer(r"<<<", code):
        if _inside(device, m.start()):
            result.device_side += 1
            continue
        parsed = _arguments(code, m.end(), ">>>")
        if parsed is None:
            continue
        args, _close = parsed
        if any(s == e for s, e in args):
            continue
        if len(args) in (2, 3):
            extra = (", 0, " if len(args) == 2 else ", ") + CURRENT_STREAM
            edits.append((cs.insert_after(args[-1][1] - 1), cs.insert_after(args[-1][1] - 1), extra))
            result.launches += 1
            changed += 1
        elif len(args) == 4:
            s, e = args[3]
            stream = re.sub(r"\s+", "", code[s:e])
            span = cs.span(s, e)
            if stream in _LEGACY_STREAMS and span is not None:
                edits.append((span[0], span[1], CURRENT_STREAM))
                result.launches += 1
                changed += 1
            elif "getCurrentCUDAStream" in stream or _holds_current_stream(code, stream):
                result.current += 1
            else:
                result.own_stream.append(stream)
    for m in _MEMCALL.finditer(code):
        if _inside(device, m.start()):
            continue
        parsed = _arguments(code, m.end(), ")")
        want = 3 if m.group(1) == "set" else 4
        if parsed is None or len(parsed[0]) != want or any(s == e for s, e in parsed[0]):
            continue
        name_end = cs.insert_after(m.start() + len("cudaMemset") - 1)
        last = cs.insert_after(parsed[0][-1][1] - 1)
        edits.append((name_end, name_end, "Async"))
        edits.append((last, last, ", " + CURRENT_STREAM))
        if want == 3:
            result.memsets += 1
        else:
            result.memcpys += 1
        changed += 1
    if changed and not any(code[h.start()] == "#" for h in _HAS_STREAM_HEADER.finditer(cs.text)):
        include = _include_edit(cs)
        if include is None:
            result.unincludable += 1
        else:
            edits.append(include)
            result.includes += 1
    return edits


def _holds_current_stream(code: str, name: str) -> bool:
    """`name` is a variable the code sets from getCurrentCUDAStream (`cudaStream_t stream = at::cuda::...()`)."""
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return False
    return bool(re.search(rf"\b{name}\s*[=({{]\s*[\w:]*getCurrentCUDAStream\s*\(", code))


def _include_edit(cs: _CString) -> tuple[int, int, str] | None:
    """Where and how `#include <c10/cuda/CUDAStream.h>` goes: after the string's last #include line, or at its top."""
    line = f"#include <{STREAM_HEADER}>"
    includes = list(_INCLUDE_LINE.finditer(cs.code))
    if includes:
        end = includes[-1].end()
        if end < len(cs.text):  # the newline that ends the line: the new line goes after it
            nl = cs.newline_in(end)
            if nl is None:
                return None
            at = cs.insert_after(end)
            return at, at, line + nl
        nl = cs.newline_in(end - 1)
        if nl is None:
            return None
        at = cs.insert_after(end - 1)
        return at, at, nl + line
    first = 1 if cs.text.startswith("\n") and len(cs.text) > 1 else 0
    nl = cs.newline_in(first)
    if nl is None:
        return None
    at = cs.starts[first]
    return at, at, line + nl


def rewrite_streams(source: str) -> StreamRewrite:
    """Move the legacy-stream work of every CUDA string (one holding `__global__` or `<<<`) to the current stream:
    `k<<<g, b>>>(...)` and `k<<<g, b, smem>>>(...)` get the stream, a `0`/`NULL`/`nullptr`/`cudaStreamDefault`/
    `cudaStreamLegacy`/`cudaStreamPerThread` stream becomes it, `cudaMemset`/`cudaMemcpy` become their `Async`
    forms on it; other stream expressions, comments and string literals are left alone."""
    tree = parse(source)
    lines = _Lines(source)
    result = StreamRewrite(source)
    edits: list[tuple[int, int, str]] = []
    for cs in _string_constants(source, tree, lines):
        if _is_cuda(cs.text):
            edits += _stream_edits(cs, result)
    for node in ast.walk(tree):  # f-strings: their text cannot be edited safely
        if isinstance(node, ast.JoinedStr):
            parts = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if "<<<" in parts:
                result.legacy_left += parts.count("<<<")
    result.source = _apply(source, edits)
    return result


def launch_on_current_stream(source: str) -> tuple[str, int]:
    """`rewrite_streams`, as (the new source, how many launches and copies were moved)."""
    r = rewrite_streams(source)
    return r.source, r.changed


def _stream_limits(source: str, tree: ast.Module, rewrite: StreamRewrite) -> list[str]:
    """What the current-stream repair cannot move, in words."""
    lines = _Lines(source)
    cpp = " ".join(cs.code for cs in _string_constants(source, tree, lines) if _is_cpp(cs.text))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    zero_streams = [
        k
        for k in ast.walk(tree)
        if isinstance(k, ast.keyword)
        and k.arg == "stream"
        and isinstance(k.value, ast.Constant)
        and k.value.value in (0, None)
        and not isinstance(k.value.value, bool)
    ]
    out = []
    if names & {"RawKernel", "RawModule"}:
        out.append(
            "launches through cupy.RawKernel/RawModule stay on CuPy's current stream: "
            "wrap them in `with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):`"
        )
    if "cuLaunchKernel" in names or re.search(r"\bcuLaunchKernel\s*\(", cpp):
        out.append("cuLaunchKernel calls (ctypes, cuda-python, the driver API) keep the stream they pass")
    if zero_streams:
        out.append(
            "NVRTC launches with stream=0 stay on the legacy default stream: pass "
            "torch.cuda.current_stream().cuda_stream"
        )
    if re.search(r"\bcublas(?!SetStream|Create|Destroy|Status|Handle)\w*\s*\(", cpp) and not re.search(
        r"cublasSetStream|getCurrentCUDABlasHandle", cpp
    ):
        out.append(
            "cuBLAS calls without cublasSetStream run on the handle's stream: "
            "use at::cuda::getCurrentCUDABlasHandle() or cublasSetStream"
        )
    if rewrite.own_stream:
        own = ", ".join(sorted(set(rewrite.own_stream)))
        k = len(rewrite.own_stream)
        out.append(f"{_n(k, 'launch on a stream of its own', 'launches on streams of their own')} ({own}) not moved")
    if rewrite.device_side:
        out.append(f"{_n(rewrite.device_side, 'launch', 'launches')} from device code (dynamic parallelism) not moved")
    if rewrite.legacy_left:
        out.append(f"{_n(rewrite.legacy_left, 'launch', 'launches')} in f-strings not rewritten")
    if rewrite.unincludable:
        out.append(f"#include <{STREAM_HEADER}> could not be written into a one-line raw string: add it by hand")
    return out


# --- scalar_type ------------------------------------------------------------------------------------------------------

_TYPE_CALL = r"\.\s*type\s*\(\s*\)"
_TYPE_SCALAR = re.compile(_TYPE_CALL + r"\s*\.\s*(?:scalarType|scalar_type)\s*\(\s*\)")
_TYPE_IS_CUDA = re.compile(_TYPE_CALL + r"\s*\.\s*is_cuda\s*\(\s*\)")
_TYPE_AT_END = re.compile(_TYPE_CALL + r"$")
_DISPATCH = re.compile(r"\bAT_DISPATCH_\w+\s*\(")
_DATA_T = re.compile(r"\.\s*data(\s*)<")

_SCALAR_FORMS = {
    "dispatch": "AT_DISPATCH on x.type() -> x.scalar_type()",
    "scalar": "x.type().scalarType() -> x.scalar_type()",
    "is_cuda": "x.type().is_cuda() -> x.is_cuda()",
    "data": "x.data<T>() -> x.data_ptr<T>()",
}


def _scalar_edits(cs: _CString, counts: dict[str, int]) -> list[tuple[int, int, str]]:
    code = cs.code
    edits = []

    def replace(s: int, e: int, text: str, form: str) -> None:
        span = cs.span(s, e)
        if span is not None:
            edits.append((span[0], span[1], text))
            counts[form] += 1

    for m in _TYPE_SCALAR.finditer(code):
        replace(m.start(), m.end(), ".scalar_type()", "scalar")
    for m in _TYPE_IS_CUDA.finditer(code):
        replace(m.start(), m.end(), ".is_cuda()", "is_cuda")
    for m in _DISPATCH.finditer(code):
        parsed = _arguments(code, m.end(), ")")
        if parsed is None or not parsed[0]:
            continue
        s, e = parsed[0][0]
        t = _TYPE_AT_END.search(code, s, e)
        if t is not None:
            replace(t.start(), t.end(), ".scalar_type()", "dispatch")
    for m in _DATA_T.finditer(code):
        depth, i = 1, m.end()
        while i < len(code) and depth and code[i] not in ";{}()":
            depth += {"<": 1, ">": -1}.get(code[i], 0)
            i += 1
        if depth or not re.match(r"\s*\(\s*\)", code[i:]):
            continue
        at = cs.insert_after(m.start(1) - 1)  # after "data"
        edits.append((at, at, "_ptr"))
        counts["data"] += 1
    return edits


def _scalar_rewrite(source: str) -> tuple[str, dict[str, int]]:
    tree = parse(source)
    lines = _Lines(source)
    counts = dict.fromkeys(_SCALAR_FORMS, 0)
    edits: list[tuple[int, int, str]] = []
    for cs in _string_constants(source, tree, lines):
        if _is_cpp(cs.text):
            edits += _scalar_edits(cs, counts)
    return _apply(source, edits), counts


def scalar_type_dispatch(source: str) -> tuple[str, int]:
    """Rewrite the `Tensor::type()` forms current torch does not compile, in every C/C++/CUDA string:
    `AT_DISPATCH_*(x.type(), ...)` and `x.type().scalarType()` -> `x.scalar_type()`, `x.type().is_cuda()` ->
    `x.is_cuda()`, `x.data<T>()` -> `x.data_ptr<T>()`. Returns the new source and how many were rewritten."""
    new, counts = _scalar_rewrite(source)
    return new, sum(counts.values())


# --- contiguous_inputs -----------------------------------------------------------------------------------------------


def _find_forward(tree: ast.Module) -> tuple[ast.ClassDef, ast.FunctionDef] | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            forwards = [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "forward"]
            if forwards:
                return node, forwards[-1]
    return None


def _torch_name(tree: ast.Module) -> str | None:
    """The name the module bound the torch package to at its top level, if any."""

    def walk(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:
        for s in stmts:
            yield s
            if isinstance(s, ast.If | ast.With):
                yield from walk(s.body)
            if isinstance(s, ast.If):
                yield from walk(s.orelse)
            if isinstance(s, ast.Try):
                yield from walk(s.body)
                for h in s.handlers:
                    yield from walk(h.body)

    for s in walk(tree.body):
        if isinstance(s, ast.Import):
            for a in s.names:
                if a.name == "torch":
                    return a.asname or "torch"
                if a.asname is None and a.name.startswith("torch."):  # `import torch.nn` binds torch
                    return "torch"
    return None


@dataclass
class _ContiguousEdit:
    source: str
    names: list[str]
    guarded: bool
    varargs: str | None
    torch_added: bool
    left: list[str]


def _contiguous(source: str, positions: Collection[int] | None) -> _ContiguousEdit | None:
    tree = parse(source)
    lines = _Lines(source)
    found = _find_forward(tree)
    if found is None:
        return None
    _cls, fn = found
    fn_start = lines.offset(fn.lineno, fn.col_offset)
    fn_end = lines.offset(fn.end_lineno or fn.lineno, fn.end_col_offset or 0)
    if CONTIGUOUS_MARK in source[fn_start:fn_end]:
        return None  # applied already
    decorators = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if "staticmethod" not in decorators:
        params = params[1:]
    varargs = fn.args.vararg.arg if fn.args.vararg else None
    if positions is None:
        names = params
        guarded = True
        use_varargs = varargs
    else:
        names = [params[i] for i in sorted(set(positions)) if 0 <= i < len(params)]
        guarded = False
        use_varargs = varargs if any(i >= len(params) for i in positions) else None
    if not names and not use_varargs:
        return None

    body = fn.body
    first = body[0]
    docstring = (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    )
    if docstring:
        end = first.end_lineno or first.lineno
        if len(body) > 1 and body[1].lineno == end:
            return None
        insert_line = end + 1
    else:
        decorated = getattr(first, "decorator_list", [])
        insert_line = min([first.lineno] + [d.lineno for d in decorated])
    indent_bytes = lines.line(first.lineno).encode("utf-8")[: first.col_offset]
    indent = indent_bytes.decode("utf-8", errors="replace")
    if first.lineno == fn.lineno or indent.strip():
        return None  # `def forward(self, x): return ...` on one line: not rewritten

    torch = _torch_name(tree)
    torch_added = False
    if (guarded and names) or use_varargs:
        if torch is None:
            torch, torch_added = "torch", True
    nl = lines.newline
    stmts = [CONTIGUOUS_MARK]
    for name in names:
        if guarded:
            stmts.append(f"{name} = {name}.contiguous() if isinstance({name}, {torch}.Tensor) else {name}")
        else:
            stmts.append(f"{name} = {name}.contiguous()")
    if use_varargs:
        stmts.append(
            f"{use_varargs} = tuple(a.contiguous() if isinstance(a, {torch}.Tensor) else a for a in {use_varargs})"
        )
    block = "".join(indent + s + nl for s in stmts)

    edits = []
    at = lines.line_start(insert_line)
    if at == len(source) and source and not source.endswith(("\n", "\r")):
        block = nl + block
    edits.append((at, at, block))
    if torch_added:
        edits.append(_import_torch_edit(tree, lines))

    left = []
    if fn.args.kwonlyargs or fn.args.kwarg:
        left.append("keyword-only and **kwargs inputs of ModelNew.forward are left as they are given")
    return _ContiguousEdit(_apply(source, edits), names, guarded, use_varargs, torch_added, left)


def _import_torch_edit(tree: ast.Module, lines: _Lines) -> tuple[int, int, str]:
    """`import torch` after the module docstring and the `from __future__` imports."""
    after = 0
    for i, s in enumerate(tree.body):
        is_doc = (
            i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
        )
        is_future = isinstance(s, ast.ImportFrom) and s.module == "__future__"
        if not (is_doc or is_future):
            break
        after = s.end_lineno or s.lineno
    if after == 0:
        line = tree.body[0].lineno if tree.body else 1
        at = lines.line_start(line)
        return at, at, "import torch" + lines.newline
    at = lines.line_start(after + 1)
    text = "import torch" + lines.newline
    if at == len(lines.source) and not lines.source.endswith(("\n", "\r")):
        text = lines.newline + text
    return at, at, text


def contiguous_inputs(source: str, tensor_positions: Collection[int] | None) -> str | None:
    """Make `ModelNew.forward`'s tensor inputs contiguous, right after its docstring: `x = x.contiguous()` for each
    positional parameter at one of `tensor_positions` (0: the first after `self`), or, when None, every positional
    parameter guarded by `isinstance(x, torch.Tensor)`; `*args` element-wise. None when there is no ModelNew.forward,
    nothing to make contiguous, or the repair is there already."""
    edit = _contiguous(source, tensor_positions)
    return edit.source if edit else None


def tensor_positions(inputs: list[InputSpec]) -> set[int] | None:
    """The positions of the tensor inputs in the verdict's first input set; None when the verdict has none."""
    if not inputs:
        return None
    case = inputs[0].case
    return {s.index for s in inputs if s.case == case and s.dtype is not None}


def _reads_raw_memory(source: str, tree: ast.Module) -> bool:
    """The C/C++ wrappers read `data_ptr` and never make or read a layout (`.contiguous()`, `.stride(`), and
    `ModelNew.forward` does not call `.contiguous()`: the kernels assume contiguous inputs."""
    lines = _Lines(source)
    cpp = "\n".join(cs.code for cs in _string_constants(source, tree, lines) if _is_cpp(cs.text))
    if "data_ptr" not in cpp or re.search(r"\.\s*(contiguous|strides?)\s*\(", cpp):
        return False
    found = _find_forward(tree)
    if found is None:
        return False
    fn = found[1]
    text = source[
        lines.offset(fn.lineno, fn.col_offset) : lines.offset(fn.end_lineno or fn.lineno, fn.end_col_offset or 0)
    ]
    return ".contiguous(" not in text


# --- the decision ----------------------------------------------------------------------------------------------------


def _wanted(verdict: Verdict) -> set[RepairKind]:
    """The repairs the verdict's own findings ask for: its domain's limits and a strict-mode failure."""
    out: set[RepairKind] = set()
    axes: set[str] = set()
    # a failed verdict failed for another cause (wrong values, a crash, a mutated input), which no mechanical repair
    # of its limits fixes: its domain and narrowings hold what was found before it failed, and ask nothing
    domain = verdict.domain if verdict.status is Status.correct else None
    if verdict.status is Status.correct:
        axes |= {c.narrows for c in verdict.checks if c.narrows}
    if domain is not None:
        if domain.streams == "default":
            axes.add("streams")
        for n in domain.narrowed:
            axes.add(n.axis)
            if n.repair:
                out.add(n.repair)
    if "streams" in axes or verdict.failed_check == "current_stream":
        out.add("current_stream")
    if "layouts" in axes or verdict.failed_check == "noncontiguous_inputs":
        out.add("contiguous_inputs")
    return out


def repair_candidate(source: str, verdict: Verdict, already: Collection[RepairKind] = ()) -> Repair | None:
    """The candidate repaired for the known, mechanical causes its verdict shows, or None (nothing applies, the
    verdict needs nothing, or the source comes out unchanged). Kinds in `already` are not applied again.

    - `scalar_type`: whenever the C/C++ strings hold the `Tensor::type()` forms current torch does not compile
      (a `compile_error`, usually).
    - `contiguous_inputs`: a `layouts` narrowing, a failed `noncontiguous_inputs` check (strict mode), or a
      `compile_error` being repaired whose wrappers read `data_ptr` and never `.contiguous()` or `.stride(`.
    - `current_stream`: a `streams` narrowing (`domain.streams == "default"`), a failed `current_stream` check
      (strict mode), or legacy-stream launches in a candidate that is being repaired anyway.
    """
    domain = verdict.domain
    if verdict.status is Status.correct and domain is not None and domain.full:
        return None
    try:
        parse(source)
    except (SyntaxError, ValueError):
        return None
    done = set(already)
    wanted = _wanted(verdict)
    fixes: list[Fix] = []
    remaining: list[str] = []
    current = source

    if "scalar_type" not in done:
        new, counts = _scalar_rewrite(current)
        total = sum(counts.values())
        if total and new != current:
            forms = ", ".join(f"{c} {_SCALAR_FORMS[k]}" for k, c in counts.items() if c)
            fixes.append(
                Fix(
                    kind="scalar_type",
                    detail=f"{_n(total, 'deprecated tensor call')} rewritten for current torch: {forms}",
                )
            )
            current = new
    compile_repaired = verdict.status is Status.compile_error and bool(fixes)

    if "contiguous_inputs" not in done:
        want = "contiguous_inputs" in wanted or (compile_repaired and _reads_raw_memory(current, parse(current)))
        if want:
            edit = _contiguous(current, tensor_positions(verdict.inputs))
            if edit is not None and edit.source != current:
                listed = list(edit.names) + ([f"*{edit.varargs}"] if edit.varargs else [])
                what = (
                    f"every positional input ({', '.join(listed)}) made contiguous where it is a tensor,"
                    if edit.guarded
                    else f"{_n(len(listed), 'tensor input')} ({', '.join(listed)}) made contiguous"
                )
                detail = what + " at the top of ModelNew.forward" + ("; import torch added" if edit.torch_added else "")
                fixes.append(Fix(kind="contiguous_inputs", detail=detail))
                remaining += edit.left
                current = edit.source

    if "current_stream" not in done:
        want = "current_stream" in wanted or bool(fixes) or compile_repaired
        if want:
            rewrite = rewrite_streams(current)
            if rewrite.changed and rewrite.source != current:
                fixes.append(Fix(kind="current_stream", detail=rewrite.describe()))
                current = rewrite.source
            if "current_stream" in wanted or rewrite.changed:
                remaining += _stream_limits(current, parse(current), rewrite)

    if not fixes or current == source:
        return None
    return Repair(source=current, fixes=fixes, remaining=list(dict.fromkeys(remaining)))
