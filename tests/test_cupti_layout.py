"""The ctypes structs of `profiler/cupti.py` are CUPTI's, byte for byte: a C++ program compiled against CUPTI's own
headers (the CUDA toolkit's, or the copy Triton ships) prints each struct's size, each field's offset and each
``*_STRUCT_SIZE`` macro, and the Python side must agree. A wrong offset here would hand libcupti garbage on the
GPU; this finds it on any machine with a C++ compiler."""

from __future__ import annotations

import ctypes as ct
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from forge_lsp.profiler import cupti

pytestmark = pytest.mark.integration  # runs a compiler and the program it built


def header_dirs() -> list[Path]:
    dirs = []
    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    dirs.append(Path(home) / "include")
    try:
        import triton

        dirs.append(Path(triton.__file__).parent / "backends" / "nvidia" / "include")
    except ImportError:
        pass
    return [d for d in dirs if (d / "cupti_range_profiler.h").is_file() and (d / "cupti_pcsampling.h").is_file()]


# ctypes class -> (C type, {python field: C field}) for the structs whose C names the classes do not carry
PLAIN = {
    cupti.PCSamplingConfigurationInfo: ("CUpti_PCSamplingConfigurationInfo", {"data": "attributeData"}),
    cupti.PCSamplingStallReason: ("CUpti_PCSamplingStallReason", {}),
    cupti.PCSamplingPCData: ("CUpti_PCSamplingPCData", {}),
    cupti.PCSamplingData: ("CUpti_PCSamplingData", {}),
    cupti.ResourceData: ("CUpti_ResourceData", {}),
    cupti.ModuleResourceData: ("CUpti_ModuleResourceData", {}),
}
PARAMS = [
    value
    for value in vars(cupti).values()
    if isinstance(value, type) and issubclass(value, cupti._Params) and value is not cupti._Params
]


def kernel_record_type(include: Path) -> str:
    text = (include / "cupti_activity.h").read_text(errors="replace")
    for version in (10, 9):
        if f"}} CUpti_ActivityKernel{version};" in text:
            return f"CUpti_ActivityKernel{version}"
    pytest.skip(f"no CUpti_ActivityKernel9/10 in {include}")


def size_macro(c_name: str) -> str:
    # the profiler's macros end in _STRUCT_SIZE, PC sampling's in Size
    return f"{c_name}Size" if c_name.startswith(("CUpti_PCSampling", "CUpti_GetCubinCrc")) else f"{c_name}_STRUCT_SIZE"


def layouts() -> list[tuple[type[ct.Structure], str, dict[str, str], bool]]:
    rows: list[tuple[type[ct.Structure], str, dict[str, str], bool]] = [
        (cls, c_name, names, False) for cls, (c_name, names) in PLAIN.items()
    ]
    rows += [(cls, cls.__name__, {}, True) for cls in PARAMS]
    return rows


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory) -> dict[str, int]:
    cc = shutil.which("c++") or shutil.which("g++")
    dirs = header_dirs()
    if cc is None or not dirs:
        pytest.skip("needs a C++ compiler and CUPTI's headers (the CUDA toolkit, or triton's copy)")
    include = dirs[0]
    record = kernel_record_type(include)
    lines = [
        "#include <stdio.h>",
        "#include <stddef.h>",
        "#include <cupti.h>",
        "#include <cupti_target.h>",
        "#include <cupti_profiler_target.h>",
        "#include <cupti_profiler_host.h>",
        "#include <cupti_range_profiler.h>",
        "#include <cupti_pcsampling.h>",
        "int main(void) {",
    ]
    for cls, c_name, names, is_params in [*layouts(), (cupti.ActivityKernel, record, {}, False)]:
        key = cls.__name__
        lines.append(f'printf("{key} sizeof %zu\\n", sizeof({c_name}));')
        if is_params:
            lines.append(f'printf("{key} macro %zu\\n", (size_t)({size_macro(c_name)}));')
        for field, *_ in cls._fields_:
            c_field = names.get(field, field)
            lines.append(f'printf("{key}.{field} %zu\\n", offsetof({c_name}, {c_field}));')
    lines += ["return 0;", "}"]
    work = tmp_path_factory.mktemp("cupti-layout")
    (work / "layout.cpp").write_text("\n".join(lines))
    built = subprocess.run(
        [cc, "-I", str(include), "-o", str(work / "layout"), str(work / "layout.cpp")], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr[-3000:]
    out = subprocess.run([str(work / "layout")], capture_output=True, text=True, check=True).stdout
    return {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in out.splitlines()}


@pytest.mark.parametrize("cls", [row[0] for row in layouts()], ids=lambda c: c.__name__)
def test_each_field_sits_where_cuptis_header_puts_it(c_layout, cls):
    for field, *_ in cls._fields_:
        assert getattr(cls, field).offset == c_layout[f"{cls.__name__}.{field}"], (cls.__name__, field)


@pytest.mark.parametrize("cls", PARAMS, ids=lambda c: c.__name__)
def test_each_parameter_struct_says_the_size_cuptis_macro_says(c_layout, cls):
    params = cls.new()
    assert getattr(params, cls._fields_[0][0]) == c_layout[f"{cls.__name__} macro"], cls.__name__


def test_the_kernel_record_fields_read_are_where_the_header_puts_them(c_layout):
    for field, *_ in cupti.ActivityKernel._fields_:
        assert getattr(cupti.ActivityKernel, field).offset == c_layout[f"ActivityKernel.{field}"], field


def test_plain_structs_have_the_headers_size(c_layout):
    for cls in PLAIN:
        assert ct.sizeof(cls) == c_layout[f"{cls.__name__} sizeof"], cls.__name__
