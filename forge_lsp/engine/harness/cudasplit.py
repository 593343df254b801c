"""The device/host split of a `load_inline` CUDA source: kernels through nvcc without torch, the torch-using host
code through g++ beside the bindings.

A model-written `.cu` is a few kernels and a launcher per kernel that takes `torch::Tensor`s, allocates the output
and launches with ``<<<...>>>``. nvcc spends most of a build on the launchers' torch headers: its host front end
(cudafe++) and the host compiler parse all of ATen's tensor API (about 11 of 13 s on the CPU host, for a kernel of
ten lines), which g++ parses in 2 s — and `main.cpp` parses it anyway, for the bindings. So this split puts:

- in the **device source** (nvcc, no torch header): the kernels, `__device__` functions and variables, and what
  both sides need (preprocessor lines, types, constants);
- in **main.cpp** (g++, the slim main prelude): the host code, where each kernel is declared as the plain host
  function nvcc emits for it (its launch stub, a global symbol of the same signature) and each launch
  ``k<<<grid, block, smem, stream>>>(args)`` becomes `forge_split_launch(k, grid, block, smem, stream, args)`:
  ``cudaLaunchKernel`` on the stub's address, what the stub itself does, the arguments converted to the kernel's
  parameter types as a call would convert them, the stream 0 by default (the legacy default stream, or the
  per-thread one where nvcc was told so).

Both files carry ``#line`` directives naming the candidate's own CUDA source, so compiler messages and `-lineinfo`
point at the lines the candidate wrote. Pure text; `split_cuda_source` says None where the split is not known to be
faithful (template kernels, torch names in device code, host code reading a `__device__` symbol...), and the caller
builds the source as written then — as it does when a split build fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .cxx import (
    _BLANK,
    _INCLUDE,
    _OP_CALL,
    _TORCH_HEADER,
    _TORCH_NAME,
    _TORCH_ONLY_API,
    _UMBRELLAS,
    _top_level_chunks,
    _torch_namespace_block,
)

SPLIT_MARK = "// forge: device/host split of the candidate's CUDA source"
LAUNCH = "forge_split_launch"
_DEVICE_QUAL = re.compile(r"\b(?:__global__|__device__|__constant__|__shared__|__managed__)\b")
_GLOBAL = re.compile(r"\b__global__\b")
_HOST_QUAL = re.compile(r"\b__host__\b")
_TEMPLATE = re.compile(r"^\s*template\s*<")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^()]*(?:\([^()]*\)[^()]*)*\)")
_EXTERN_C = re.compile(r'^\s*extern\s+"C"\s*')
_TYPE_DECL = re.compile(r"^\s*(?:typedef\b|using\b|(?:struct|class|union|enum)\b[^(]*$)")
_CONST_DECL = re.compile(r"^\s*(?:static\s+|inline\s+)*(?:constexpr|const)\b[^(]*=")
_CONSTEXPR = re.compile(r"\bconstexpr\b")
_NAMESPACE = re.compile(r"^\s*(?:inline\s+)?namespace\b")
_EXTERN_BLOCK = re.compile(r'^\s*extern\s+"C"\s*\{')
_IDENT = re.compile(r"[A-Za-z_]\w*")
_CHEVRON = "<<<"
#: nvcc flags that make stream 0 the per-thread default stream (what `CUDA_API_PER_THREAD_DEFAULT_STREAM` does for g++)
_PER_THREAD = re.compile(r"^-?-default-stream[= ]?per-thread$")
_DEFINE_FLAG = re.compile(r"^-[DU]\S+$")
_OPT = re.compile(r"^-O[0-3]$")
_MINMAX = re.compile(r"(?<![\w:.>])(?:min|max)\s*\(")

#: host min/max overloads nvcc's crt/math_functions.hpp gives the host code of a .cu (g++ has none of them)
_HOST_MINMAX = "\n".join(
    [
        "#include <cmath>",
        "// forge: the host min/max overloads nvcc gives host code (crt/math_functions.hpp), for g++",
        *(
            f"static inline {ret} {fn}({a} x, {b} y) {{ return {body}; }}"
            for fn, op in (("min", "<"), ("max", ">"))
            for ret, a, b, body in (
                ("int", "int", "int", f"x {op} y ? x : y"),
                ("unsigned int", "unsigned int", "unsigned int", f"x {op} y ? x : y"),
                ("unsigned int", "int", "unsigned int", f"{fn}(static_cast<unsigned int>(x), y)"),
                ("unsigned int", "unsigned int", "int", f"{fn}(x, static_cast<unsigned int>(y))"),
                ("long", "long", "long", f"x {op} y ? x : y"),
                ("unsigned long", "unsigned long", "unsigned long", f"x {op} y ? x : y"),
                ("unsigned long", "long", "unsigned long", f"{fn}(static_cast<unsigned long>(x), y)"),
                ("unsigned long", "unsigned long", "long", f"{fn}(x, static_cast<unsigned long>(y))"),
                ("long long", "long long", "long long", f"x {op} y ? x : y"),
                ("unsigned long long", "unsigned long long", "unsigned long long", f"x {op} y ? x : y"),
                (
                    "unsigned long long",
                    "long long",
                    "unsigned long long",
                    f"{fn}(static_cast<unsigned long long>(x), y)",
                ),
                (
                    "unsigned long long",
                    "unsigned long long",
                    "long long",
                    f"{fn}(x, static_cast<unsigned long long>(y))",
                ),
                ("float", "float", "float", f"f{fn}f(x, y)"),
                ("double", "double", "double", f"f{fn}(x, y)"),
                ("double", "float", "double", f"f{fn}(static_cast<double>(x), y)"),
                ("double", "double", "float", f"f{fn}(x, static_cast<double>(y))"),
            )
        ),
    ]
)

#: the launch: what nvcc's stub for a kernel does, on the stub's address; `P` comes from the kernel alone, so each
#: argument converts to its parameter's type as in a call of the kernel
_LAUNCHER = f"""\
#include <cuda.h>
#include <cuda_runtime.h>
template <class T> struct forge_split_same {{ using type = T; }};
template <class... P>
static inline void {LAUNCH}(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                      typename forge_split_same<P>::type... args) {{
  void* argv[sizeof...(P) + 1] = {{static_cast<void*>(&args)..., nullptr}};
  cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, argv, smem, stream);
}}
"""


#: what only the bindings need of the prelude: pybind11 with torch's casters and error translation
_BINDING_HEADERS = ("#include <torch/csrc/utils/pybind.h>", "#include <torch/csrc/Exceptions.h>")
#: the C and C++ library headers pybind11 and torch's Python headers bring to the full prelude: the lite one
#: declares them too, so host code means the same with either (`abs(float)` is <math.h>'s overload in both)
_BINDING_STD_HEADERS = tuple(
    f"#include <{h}>"
    for h in "math.h inttypes.h unistd.h sys/stat.h sys/time.h cxxabi.h list forward_list stack thread valarray".split()
)


def split_prelude(include_dir: Path, lite: bool = False) -> str:
    """What every split main.cpp starts with, the same for all candidates (so one precompiled header serves them):
    torch's tensor, pybind11 with torch's casters and error translation, what torch's per-operator headers include
    before their own declarations (Context, DeviceGuard, TensorUtils...: 3 of a main.cpp's 11 s of g++), dispatch
    macros, the c10 CUDA stream, guard and error headers, torch's dtype names, and the launch helper.

    `lite`: without pybind11 and torch's Python headers — a main.cpp whose bindings are a separate object
    (`binding_signatures`). pybind11's headers alone cost any file that includes them about 4 s of g++ (the code of
    its dispatcher, error handling and internals is emitted in each), most of a split build's host side."""
    return "\n".join(
        [
            SPLIT_MARK,
            "#include <ATen/core/Tensor.h>",
            *(_BINDING_STD_HEADERS if lite else _BINDING_HEADERS),
            "#include <c10/util/Exception.h>",
            "#include <ATen/Context.h>",
            "#include <ATen/DeviceGuard.h>",
            "#include <ATen/TensorUtils.h>",
            "#include <ATen/TracerMode.h>",
            "#include <ATen/core/Generator.h>",
            "#include <ATen/core/Reduction.h>",
            "#include <c10/core/Scalar.h>",
            "#include <c10/core/Storage.h>",
            "#include <c10/core/TensorOptions.h>",
            "#include <ATen/Dispatch.h>",
            "#include <c10/cuda/CUDAStream.h>",
            "#include <c10/cuda/CUDAGuard.h>",
            "#include <c10/cuda/CUDAException.h>",
            _torch_namespace_block(include_dir),
            _LAUNCHER,
        ]
    )


@dataclass
class Split:
    """What `split_cuda_source` makes: the device source for nvcc, main.cpp's sources, and the flags each needs."""

    device: str
    host: list[str]
    kernels: list[str]
    #: flags main.cpp needs from the nvcc flags the host code was written for (-D/-U, per-thread stream, -O)
    host_flags: list[str] = field(default_factory=list)
    #: flags the device source needs beyond the candidate's (kernel templates: linkable stubs)
    device_flags: list[str] = field(default_factory=list)


def _line_of(src: str, offset: int) -> int:
    return src.count("\n", 0, offset) + 1


def _balanced(code: str, start: int, open_: str = "(", close: str = ")") -> int:
    """The index just past the bracket that closes the one at `start` (-1 when unbalanced)."""
    depth = 0
    for i in range(start, len(code)):
        c = code[i]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _split_top(text: str) -> list[str]:
    """`text` split at commas outside brackets."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in text:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


@dataclass
class _Kernel:
    name: str
    params: str
    extern_c: bool
    #: ``template <...>`` for a kernel template (its launches name the arguments), else ""
    template: str = ""


def _kernel_of(code: str) -> _Kernel | None:
    """A kernel's name, parameter list and template header from a chunk (comments and strings blanked), or None."""
    template = ""
    if _TEMPLATE.match(code):
        start = code.index("<")
        close = _balanced(code, start, "<", ">")
        if close < 0 or not _GLOBAL.search(code, close) or _GLOBAL.search(code[:close]):
            return None
        template = " ".join(code[:close].split())
    g = _GLOBAL.search(code)
    if g is None:
        return None
    head = _LAUNCH_BOUNDS.sub(" ", code[g.end() :])
    m = re.match(r"\s*void\s+(\w+)\s*\(", head)
    if m is None:
        return None
    close = _balanced(head, m.end() - 1)
    if close < 0:
        return None
    params = head[m.end() : close - 1]
    if "=" in params:  # default arguments: not repeated in a declaration
        return None
    params = re.sub(r"\b__grid_constant__\b", " ", params)
    return _Kernel(m.group(1), " ".join(params.split()), False, template)


def _defined_name(code: str) -> str | None:
    """The name a device-only chunk defines (a __device__ function or variable), or None."""
    text = _LAUNCH_BOUNDS.sub(" ", code)
    m = re.search(r"(\w+)\s*(?:\(|\[|=|;)", text)
    return m.group(1) if m else None


#: the types AT_DISPATCH's macros give `scalar_t` (ATen/Dispatch.h's cases), where they are plain C++ types
_DISPATCH_TYPES = {
    "AT_DISPATCH_FLOATING_TYPES": ("double", "float"),
    "AT_DISPATCH_INTEGRAL_TYPES": ("uint8_t", "int8_t", "int32_t", "int64_t", "int16_t"),
    "AT_DISPATCH_ALL_TYPES": ("uint8_t", "int8_t", "int32_t", "int64_t", "int16_t", "double", "float"),
}
_DISPATCH = re.compile(r"\b(AT_DISPATCH_\w+)\s*\(")


def _rewrite_launches(code: str, src: str, kernels: dict[str, _Kernel], instances: set[tuple[str, str]]) -> str | None:
    """`src` with each ``k<<<cfg>>>(args)`` written as a `LAUNCH` call (`code`: `src` blanked, same offsets); None
    when a launch is not of a kernel of this source or cannot be read. A kernel template's launch names its template
    arguments (``k<256><<<...>>>``, ``k<scalar_t><<<...>>>`` inside one of AT_DISPATCH's plain-type macros); each
    specialization it needs is added to `instances` (the device source instantiates them)."""
    dispatch = set(_DISPATCH.findall(code))
    out, pos = [], 0
    while True:
        i = code.find(_CHEVRON, pos)
        if i < 0:
            break
        before = code[pos:i].rstrip()
        targs = ""
        if before.endswith(">"):  # k<...><<<
            depth, j = 0, len(before) - 1
            while j >= 0:
                depth += {">": 1, "<": -1}.get(before[j], 0)
                if depth == 0:
                    break
                j -= 1
            if j < 0:
                return None
            targs = " ".join(src[pos + j + 1 : pos + len(before) - 1].split())
            before = before[:j]
        m = re.search(r"(\w+)\s*$", before)
        if m is None or m.group(1) not in kernels or bool(targs) != bool(kernels[m.group(1)].template):
            return None  # not a kernel of this source, or a template's arguments left to deduction
        if targs:
            if re.search(r"\bscalar_t\b", targs):
                types = {t for d in dispatch for t in _DISPATCH_TYPES.get(d, ("?",))}
                if len(dispatch) != 1 or "?" in types:
                    return None  # a dispatch whose types are not plain C++ (Half, BFloat16...) or not known
                instances.update((m.group(1), re.sub(r"\bscalar_t\b", t, targs)) for t in types)
            else:
                instances.add((m.group(1), targs))
        name_at = pos + m.start(1)
        j = i + 3
        depth, end = 0, -1
        while j < len(code) - 2:
            c = code[j]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif depth == 0 and code.startswith(">>>", j):
                end = j
                break
            j += 1
        if end < 0:
            return None
        cfg = _split_top(src[i + 3 : end])
        if not 2 <= len(cfg) <= 4 or any(not c.strip() for c in cfg):
            return None
        cfg += ["0"] * (4 - len(cfg))
        k = end + 3
        while k < len(code) and code[k].isspace():
            k += 1
        if k >= len(code) or code[k] != "(":
            return None
        close = _balanced(code, k)
        if close < 0:
            return None
        args = src[k + 1 : close - 1]
        callee = f"{m.group(1)}<{targs}>" if targs else m.group(1)
        call = f"{LAUNCH}({callee}, {', '.join(c.strip() for c in cfg)}"
        call += f", {args})" if args.strip() else ")"
        # the launch keeps its lines: compiler messages and line info stay where the candidate wrote them
        newlines = src.count("\n", name_at, close) - call.count("\n")
        out.append(src[pos:name_at])
        out.append(call + "\n" * max(0, newlines))
        pos = close
    out.append(src[pos:])
    return "".join(out)


def split_cuda_source(
    cpp_sources: list[str],
    cuda_source: str,
    include_dir: Path,
    origin: str,
    extra_cuda_cflags: list[str] | None = None,
    functions: list[str] | None = None,
    prelude_include: str | None = None,
) -> Split | None:
    """The device/host split of one CUDA source (see the module's doc), or None where it would not be faithful.

    `origin` is the file name the ``#line`` directives give: the candidate's CUDA source as written. With
    `prelude_include`, main.cpp starts with ``#include`` of that file (`split_prelude`'s text, which a precompiled
    header may stand for) rather than the text itself."""
    joined_cpp = "\n".join(cpp_sources)
    if _TORCH_ONLY_API.search(_BLANK.sub(" ", cuda_source)) or _TORCH_ONLY_API.search(_BLANK.sub(" ", joined_cpp)):
        return None
    code_all = _BLANK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), cuda_source)
    if re.search(
        r"\b(?:thrust|cub|cooperative_groups::launch)\b|\[[=&][^\]]*\]\s*(?:\([^)]*\))?\s*__device__", code_all
    ):
        return None
    device: list[str] = []
    host: list[str | tuple[str, str, str]] = []  # text, or a host chunk whose launches are rewritten below
    kernels: dict[str, _Kernel] = {}
    device_names: set[str] = set()
    host_codes: list[str] = []
    offset = 0
    quoted = origin.replace("\\", "\\\\").replace('"', '\\"')
    for chunk in _top_level_chunks(cuda_source):
        start, offset = offset, offset + len(chunk)
        code = code_all[start : start + len(chunk)]
        if not chunk.strip():
            continue
        line = f'#line {_line_of(cuda_source, start)} "{quoted}"\n'
        text = chunk if chunk.endswith("\n") else chunk + "\n"
        stripped = code.strip()
        if stripped.startswith("#"):
            inc = _INCLUDE.search(chunk)
            if inc and (_TORCH_HEADER.match(inc.group(1)) or inc.group(1) in _UMBRELLAS):
                if inc.group(1) not in _UMBRELLAS:
                    host.append(line + text)  # a torch header of its own (c10/cuda/CUDAGuard.h): main.cpp
                continue
            device.append(line + text)
            host.append(line + text)
            continue
        if _DEVICE_QUAL.search(code):
            if _TORCH_NAME.search(code) or _NAMESPACE.match(code) or _EXTERN_BLOCK.match(code):
                return None  # torch in device code, or kernels inside a namespace or block: not split
            if _GLOBAL.search(code):
                kernel = _kernel_of(code)
                if kernel is None:
                    return None
                kernel.extern_c = bool(_EXTERN_C.match(chunk))  # the blanked code has lost the "C"
                known = kernels.get(kernel.name)
                if known is not None and (known.params, known.template) != (kernel.params, kernel.template):
                    return None  # overloaded kernels
                # a static kernel's stub is local to its file: main.cpp's launches need it global
                device.append(line + re.sub(r"^(\s*)static\s+", r"\1", text, count=1))
                if known is None:
                    kernels[kernel.name] = kernel
                    decl = f"{'extern ' + chr(34) + 'C' + chr(34) + ' ' if kernel.extern_c else ''}"
                    head = f"{kernel.template} " if kernel.template else ""
                    host.append(f"{line}{head}{decl}void {kernel.name}({kernel.params});\n")
                continue
            device.append(line + text)
            if _HOST_QUAL.search(code) and re.search(r"\b(?:inline|static|constexpr|__forceinline__)\b", code):
                host.append(line + text)  # a __host__ __device__ helper the launchers may call too
            else:
                name = _defined_name(code)
                if name:
                    device_names.add(name)
            continue
        if _TORCH_NAME.search(code) or _CHEVRON in code:
            host.append((line, chunk, code))
            host_codes.append(code)
            continue
        if _TYPE_DECL.match(code) or _CONST_DECL.match(code) or _CONSTEXPR.search(code.split("{", 1)[0]):
            device.append(line + text)
            host.append(line + text)
            continue
        if _NAMESPACE.match(code) or (stripped.endswith(";") and "(" not in stripped.split("=", 1)[0]):
            # a namespace of helpers, a variable: what the device code may read too goes to both when it defines no
            # function; a host function in a namespace stays on the host
            if "{" in stripped and re.search(r"\)\s*(?:const\s*)?\{", stripped):
                host.append((line, chunk, code))
                host_codes.append(code)
            elif re.match(r"^\s*(?:static\s+)?(?:const|constexpr)\b", code) or _NAMESPACE.match(code):
                device.append(line + text)
                host.append(line + text)
            else:
                host.append((line, chunk, code))
                host_codes.append(code)
            continue
        host.append((line, chunk, code))
        host_codes.append(code)
    if not kernels:
        return None
    cpp_code = _BLANK.sub(" ", joined_cpp)
    if any(not re.search(rf"\b{re.escape(f)}\s*\(", cpp_code) for f in functions or []):
        return None  # as written, main.cpp's bindings would not find it (cpp_sources do not declare it)
    names = set(kernels)
    instances: set[tuple[str, str]] = set()
    host_text: list[str] = []
    for item in host:
        if isinstance(item, str):
            host_text.append(item)
            continue
        line, chunk, code = item
        used = set(_IDENT.findall(code))
        if used & device_names:
            return None  # host code reading a __device__ symbol or calling a device function: not split
        if functions and re.match(r"^\s*static\b", code) and used & set(functions):
            return None  # a static launcher the bindings name: it would not link as written
        rewritten = _rewrite_launches(code, chunk, kernels, instances)
        if rewritten is None:
            return None
        host_text.append(line + (rewritten if rewritten.endswith("\n") else rewritten + "\n"))
    if not host_codes:
        return None
    host_code = "\n".join(host_codes) + "\n" + _BLANK.sub(" ", joined_cpp)
    flags = list(extra_cuda_cflags or [])
    host_flags = [f for f in flags if _DEFINE_FLAG.match(f)]
    opts = [f for f in flags if _OPT.match(f)]
    if opts:
        host_flags.append(opts[-1])
    if any(_PER_THREAD.match(f) for f in flags) or any(
        a in ("-default-stream", "--default-stream") and b == "per-thread"
        for a, b in zip(flags, flags[1:], strict=False)
    ):
        host_flags.append("-DCUDA_API_PER_THREAD_DEFAULT_STREAM")
    ops_dir = include_dir / "ATen" / "ops"
    extras = [
        f"#include <ATen/ops/{n}.h>" for n in sorted(set(_OP_CALL.findall(host_code))) if (ops_dir / f"{n}.h").is_file()
    ]
    if _MINMAX.search(host_code):
        extras.append(_HOST_MINMAX)
    first = f'#include "{prelude_include}"' if prelude_include else split_prelude(include_dir)
    kept_cpp = [
        "".join(
            ln
            for ln in src.splitlines(keepends=True)
            if not ((m := _INCLUDE.match(ln.rstrip("\n"))) and m.group(1) in _UMBRELLAS)
        )
        for src in cpp_sources
    ]
    device_text = "#include <cuda.h>\n#include <cuda_runtime.h>\n" + "".join(device)
    device_flags: list[str] = []
    if instances:
        # the specializations main.cpp launches, instantiated here with stubs main.cpp can link (nvcc makes a
        # template's stubs static unless told otherwise; main.cpp only declares the template, so this file holds
        # the one definition of each)
        taken = ", ".join(f"(void*)&{k}<{a}>" for k, a in sorted(instances))
        device_text = "#include <cstdint>\n" + device_text
        device_text += f'\n#line 1 "forge-split-instances"\n__attribute__((used)) static void* forge_split_instances[] = {{{taken}}};\n'
        device_flags.append("-static-global-template-stub=false")
    return Split(
        device=device_text,
        host=[first + "\n" + "\n".join(extras) + "\n", *host_text, '#line 1 "main.cpp"\n', *kept_cpp],
        kernels=sorted(names),
        host_flags=host_flags,
        device_flags=device_flags,
    )


# ---------------------------------------------------------------- bindings as an object of their own
#: the words a bound function's declared types may use: types every split prelude declares the same way in any
#: file (so a declaration means the same in the bindings' object as in the candidate's main.cpp)
_BIND_WORDS = frozenset(
    "torch at c10 std Tensor const unsigned signed int long short char float double bool void size_t int8_t "
    "int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t vector optional IntArrayRef Scalar ScalarType "
    "string tuple pair Half BFloat16 SymInt ArrayRef Device Layout MemoryFormat TensorList".split()
)
_BIND_TOKEN = re.compile(r"[A-Za-z_]\w*|::|[<>,&*]|\S")
_BIND_DECL = re.compile(r"^(?P<ret>[^()]+?)\b(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^()]*)\)\s*$", re.DOTALL)


def _bind_type(text: str, named: bool) -> str | None:
    """A declared type as canonical tokens, the parameter's name (and default) dropped where `named`; None where it
    uses anything but `_BIND_WORDS`."""
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "=" and depth == 0:
            cut = i
            break
    tokens = _BIND_TOKEN.findall(text[:cut])
    idents = [i for i, t in enumerate(tokens) if _IDENT.fullmatch(t)]
    if named and len(idents) >= 2 and idents[-1] == len(tokens) - 1 and tokens[-1] not in _BIND_WORDS:
        tokens = tokens[:-1]  # the parameter's name
    if not tokens or any(not re.fullmatch(r"::|[<>,&*]", t) and t not in _BIND_WORDS for t in tokens):
        return None
    return " ".join(tokens)


def _params_of(text: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def binding_signatures(cpp_sources: list[str], functions: list[str]) -> list[str] | None:
    """The type of each bound function as its declaration in `cpp_sources` gives it (``RET (PARAM, ...)``, canonical
    tokens), in the order of `functions`; None unless `cpp_sources` are only `#include`s, `#pragma once` and one
    plain declaration per function, in types every prelude knows (`_BIND_WORDS`). Then the bindings can be an object
    compiled once for all candidates whose functions have these types (`bindings_source`), and main.cpp only takes
    the functions' addresses (`bindings_tail`)."""
    if not functions:
        return None
    text = "\n".join(cpp_sources)
    if '"' in text or "'" in text:
        return None
    code = _BLANK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    kept = []
    for line in code.splitlines():
        s = line.strip()
        if s.startswith("#"):
            if not (_INCLUDE.match(s) or re.fullmatch(r"#\s*pragma\s+once", s)):
                return None
            continue
        kept.append(line)
    found: dict[str, str] = {}
    for stmt in " ".join(kept).split(";"):
        if not stmt.strip():
            continue
        m = _BIND_DECL.match(stmt.strip())
        if m is None:
            return None
        ret = _bind_type(m.group("ret"), named=False)
        raw = m.group("params").strip()
        params = [] if raw in ("", "void") else [_bind_type(p, named=True) for p in _params_of(raw)]
        if ret is None or any(p is None for p in params):
            return None
        sig = f"{ret} ({', '.join(p for p in params if p)})"
        if found.setdefault(m.group("name"), sig) != sig:
            return None  # overloads
    if any(f not in found for f in functions):
        return None
    return [found[f] for f in functions]


def bindings_tag(sigs: list[str], wrap: bool) -> str:
    """The name a bindings object's symbols carry: one per set of function types (and error wrapping)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps([sorted(set(sigs)), wrap]).encode()).hexdigest()[:16]


def _bind_decls(sigs: list[str], tag: str) -> str:
    """One undefined declaration per signature: what `decltype` reads the function type from."""
    out = []
    for i, sig in enumerate(sigs):
        ret, params = sig.split(" (", 1)
        out.append(f"{ret} forge_sig_{tag}_{i}({params};")
    return "\n".join(out)


def bindings_source(prelude_include: str, sigs: list[str], tag: str, wrap: bool) -> str:
    """The bindings' object for functions of these types: pybind11's module definition, whose functions (names,
    docstrings, addresses) main.cpp hands over before the module's code runs, each bound as torch's load_inline binds
    it (``m.def(name, torch::wrap_pybind_function(f), doc)``, or ``m.def(name, f, doc)`` where `wrap` is False).
    `tag` names its symbols (the module init ``PyInit_forge_bind_<tag>`` and the table setter, both hidden: a
    module's init never reaches another module's copy of them)."""
    cases = []
    for i in range(len(sigs)):
        f = f"*reinterpret_cast<decltype(&forge_sig_{tag}_{i})>(e.fn)"
        bound = f"torch::wrap_pybind_function({f})" if wrap else f
        cases.append(f"    case {i}: m.def(e.name, {bound}, e.doc); break;")
    return "\n".join(
        [
            f'#include "{prelude_include}"',
            '#line 1 "forge-bindings"',
            f"struct forge_bind_entry_{tag} {{ const char* name; const char* doc; int sig; void (*fn)(); }};",
            _bind_decls(sigs, tag),
            f"static const forge_bind_entry_{tag}* forge_bind_entries = nullptr;",
            "static unsigned long forge_bind_count = 0;",
            f'__attribute__((visibility("hidden"))) void forge_bind_table_{tag}(const forge_bind_entry_{tag}* e, '
            "unsigned long n) {",
            "  forge_bind_entries = e;",
            "  forge_bind_count = n;",
            "}",
            "// hidden: each module's init calls the definition linked into its own file, whatever else is loaded",
            '#pragma push_macro("PYBIND11_EXPORT")',
            "#undef PYBIND11_EXPORT",
            '#define PYBIND11_EXPORT __attribute__((visibility("hidden")))',
            f"PYBIND11_MODULE(forge_bind_{tag}, m) {{",
            "  for (unsigned long i = 0; i < forge_bind_count; ++i) {",
            "    const auto& e = forge_bind_entries[i];",
            "    switch (e.sig) {",
            *cases,
            "    }",
            "  }",
            "}",
            '#pragma pop_macro("PYBIND11_EXPORT")',
            "",
        ]
    )


def bindings_tail(functions: dict[str, str], sigs: list[str], tag: str) -> str:
    """The end of a main.cpp whose bindings are `bindings_source`'s object: the module's init function (the one
    Python looks for, ``PyInit_`` and the extension's name) hands the bound functions' names, docstrings and
    addresses to that object and returns its module definition. Each address is taken at the declared type, so
    the overload the bindings mean is the one bound."""
    index = {sig: i for i, sig in enumerate(sorted(set(sigs)))}
    rows = [
        f'    {{"{name}", "{doc}", {index[sig]}, '
        f"reinterpret_cast<void (*)()>(static_cast<decltype(&forge_sig_{tag}_{index[sig]})>(&{name}))}},"
        for (name, doc), sig in zip(functions.items(), sigs, strict=True)
    ]
    return "\n".join(
        [
            '#line 1 "forge-bindings"',
            "struct _object;",
            f"struct forge_bind_entry_{tag} {{ const char* name; const char* doc; int sig; void (*fn)(); }};",
            _bind_decls(list(index), tag),
            f"void forge_bind_table_{tag}(const forge_bind_entry_{tag}*, unsigned long) "
            '__attribute__((visibility("hidden")));',
            f'extern "C" __attribute__((visibility("hidden"))) _object* PyInit_forge_bind_{tag}();',
            "#define FORGE_BIND_INIT_(n) PyInit_##n",
            "#define FORGE_BIND_INIT(n) FORGE_BIND_INIT_(n)",
            'extern "C" __attribute__((visibility("default"))) _object* FORGE_BIND_INIT(TORCH_EXTENSION_NAME)() {',
            f"  static const forge_bind_entry_{tag} entries[] = {{",
            *rows,
            "  };",
            f"  forge_bind_table_{tag}(entries, {len(rows)});",
            f"  return PyInit_forge_bind_{tag}();",
            "}",
            "",
        ]
    )
