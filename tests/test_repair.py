"""Automatic repairs (forge_lsp/engine/repair.py): text in, text out, on model-style candidates."""

from __future__ import annotations

import ast

import pytest

from forge_lsp.engine.repair import (
    CONTIGUOUS_MARK,
    CURRENT_STREAM,
    Repair,
    contiguous_inputs,
    launch_on_current_stream,
    repair_candidate,
    rewrite_streams,
    scalar_type_dispatch,
    tensor_positions,
)
from forge_lsp.engine.verdict import Check, Domain, InputSpec, Narrowing, Status, Verdict
from forge_lsp.parsing import parse

S = CURRENT_STREAM
INCLUDE = "#include <c10/cuda/CUDAStream.h>"


def strings(source: str) -> list[str]:
    """Every non-statement string constant of the source, in order: what load_inline would be given."""
    tree = parse(source)
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and "<" in n.value
    ]


def candidate(body: str, *, includes: str = "#include <torch/extension.h>\n" + INCLUDE + "\n") -> str:
    """A KernelBench-style load_inline candidate whose CUDA string holds `body` after the includes."""
    return (
        '"""ReLU as one CUDA kernel (model-written)."""\n'
        "\n"
        "import torch\n"
        "import torch.nn as nn\n"
        "from torch.utils.cpp_extension import load_inline\n"
        "\n"
        'cuda_source = r"""\n'
        f"{includes}"
        "\n"
        "__global__ void relu_kernel(const float* x, float* y, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;\n"
        "}\n"
        "\n"
        "torch::Tensor relu_cuda(torch::Tensor x) {\n"
        "    auto y = torch::empty_like(x);\n"
        "    int n = x.numel();\n"
        "    const int threads = 256;\n"
        "    const int blocks = (n + threads - 1) / threads;\n"
        f"{body}\n"
        "    return y;\n"
        "}\n"
        '"""\n'
        "\n"
        'cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"\n'
        "\n"
        "relu = load_inline(\n"
        '    name="relu",\n'
        "    cpp_sources=cpp_source,\n"
        "    cuda_sources=cuda_source,\n"
        '    functions=["relu_cuda"],\n'
        "    verbose=False,\n"
        ")\n"
        "\n"
        "\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.relu = relu\n"
        "\n"
        "    def forward(self, x):\n"
        "        return self.relu.relu_cuda(x)\n"
    )


ARGS = "x.data_ptr<float>(), y.data_ptr<float>(), n"

# (before, after): launches the stream repair rewrites, each exactly
LAUNCHES = [
    pytest.param(
        f"    relu_kernel<<<blocks, threads>>>({ARGS});",
        f"    relu_kernel<<<blocks, threads, 0, {S}>>>({ARGS});",
        id="one-line",
    ),
    pytest.param(
        f"    relu_kernel<<<\n        blocks,\n        threads\n    >>>({ARGS});",
        f"    relu_kernel<<<\n        blocks,\n        threads, 0, {S}\n    >>>({ARGS});",
        id="multi-line config",
    ),
    pytest.param(
        "    relu_kernel<<<blocks, threads>>>(\n        x.data_ptr<float>(),\n        y.data_ptr<float>(),\n        n);",
        f"    relu_kernel<<<blocks, threads, 0, {S}>>>(\n        x.data_ptr<float>(),\n        y.data_ptr<float>(),\n        n);",
        id="multi-line arguments",
    ),
    pytest.param(
        f"    relu_kernel<float><<<blocks, threads>>>({ARGS});",
        f"    relu_kernel<float><<<blocks, threads, 0, {S}>>>({ARGS});",
        id="template",
    ),
    pytest.param(
        f"    relu_kernel<float, 4><<<blocks, threads>>>({ARGS});",
        f"    relu_kernel<float, 4><<<blocks, threads, 0, {S}>>>({ARGS});",
        id="template with two arguments",
    ),
    pytest.param(
        f"    relu_kernel<<<dim3((n + 255) / 256, 1), dim3(16, 16)>>>({ARGS});",
        f"    relu_kernel<<<dim3((n + 255) / 256, 1), dim3(16, 16), 0, {S}>>>({ARGS});",
        id="dim3 with arithmetic",
    ),
    pytest.param(
        f"    relu_kernel<<<std::min((n + 255) / 256, 65535), 256>>>({ARGS});",
        f"    relu_kernel<<<std::min((n + 255) / 256, 65535), 256, 0, {S}>>>({ARGS});",
        id="std::min in the grid",
    ),
    pytest.param(
        f"    relu_kernel<<<static_cast<int>(blocks), threads>>>({ARGS});",
        f"    relu_kernel<<<static_cast<int>(blocks), threads, 0, {S}>>>({ARGS});",
        id="static_cast in the grid",
    ),
    pytest.param(
        f"    relu_kernel<<<n >> 8, 256>>>({ARGS});",
        f"    relu_kernel<<<n >> 8, 256, 0, {S}>>>({ARGS});",
        id="shift in the grid",
    ),
    pytest.param(
        f"    relu_kernel<<<n < 1024 ? 1 : n / 1024, 1024>>>({ARGS});",
        f"    relu_kernel<<<n < 1024 ? 1 : n / 1024, 1024, 0, {S}>>>({ARGS});",
        id="comparison in the grid",
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, Threads<256>>>>({ARGS});",
        f"    relu_kernel<<<blocks, Threads<256>, 0, {S}>>>({ARGS});",
        id="template closing next to the launch closing",
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, threads, threads * sizeof(float)>>>({ARGS});",
        f"    relu_kernel<<<blocks, threads, threads * sizeof(float), {S}>>>({ARGS});",
        id="shared memory",
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, threads, 0, 0>>>({ARGS});",
        f"    relu_kernel<<<blocks, threads, 0, {S}>>>({ARGS});",
        id="explicit 0 stream",
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, threads, 0, nullptr>>>({ARGS});",
        f"    relu_kernel<<<blocks, threads, 0, {S}>>>({ARGS});",
        id="nullptr stream",
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, threads, 64, NULL>>>({ARGS});",
        f"    relu_kernel<<<blocks, threads, 64, {S}>>>({ARGS});",
        id="NULL stream",
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, threads, 0, cudaStreamDefault>>>({ARGS});",
        f"    relu_kernel<<<blocks, threads, 0, {S}>>>({ARGS});",
        id="cudaStreamDefault",
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, threads, 0, cudaStreamLegacy>>>({ARGS});",
        f"    relu_kernel<<<blocks, threads, 0, {S}>>>({ARGS});",
        id="cudaStreamLegacy",
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, threads, 0, cudaStreamPerThread>>>({ARGS});",
        f"    relu_kernel<<<blocks, threads, 0, {S}>>>({ARGS});",
        id="cudaStreamPerThread",
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, threads /* per block */>>>({ARGS});",
        f"    relu_kernel<<<blocks, threads, 0, {S} /* per block */>>>({ARGS});",
        id="comment inside the config",
    ),
    pytest.param(
        f'    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu", ([&] {{\n'
        f"        relu_kernel<<<blocks, threads>>>({ARGS});\n"
        f"    }}));",
        f'    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu", ([&] {{\n'
        f"        relu_kernel<<<blocks, threads, 0, {S}>>>({ARGS});\n"
        f"    }}));",
        id="inside an AT_DISPATCH lambda",
    ),
    pytest.param(
        f"#define LAUNCH(k, n) k<<<((n) + 255) / 256, 256>>>\n    LAUNCH(relu_kernel, n)({ARGS});",
        f"#define LAUNCH(k, n) k<<<((n) + 255) / 256, 256, 0, {S}>>>\n    LAUNCH(relu_kernel, n)({ARGS});",
        id="inside a macro",
    ),
]


@pytest.mark.parametrize(("before", "after"), LAUNCHES)
def test_legacy_launches_move_to_the_current_stream(before, after):
    src = candidate(before)
    new, n = launch_on_current_stream(src)
    assert new == candidate(after)
    assert n == 1
    parse(new)


# launches the stream repair leaves exactly as they are
UNTOUCHED = [
    pytest.param(
        f"    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>({ARGS});", id="at:: current"
    ),
    pytest.param(
        f"    relu_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>({ARGS});", id="c10:: current"
    ),
    pytest.param(
        f"    cudaStream_t stream = at::cuda::getCurrentCUDAStream();\n"
        f"    relu_kernel<<<blocks, threads, 0, stream>>>({ARGS});",
        id="stream variable",
    ),
    pytest.param(f"    // relu_kernel<<<blocks, threads>>>({ARGS});", id="line comment"),
    pytest.param(f"    /* first try:\n       relu_kernel<<<blocks, threads>>>({ARGS});\n    */", id="block comment"),
    pytest.param('    printf("launching relu_kernel<<<blocks, threads>>>\\n");', id="inside a C string"),
    pytest.param("    cudaMemsetAsync(y.data_ptr<float>(), 0, n * sizeof(float), stream);", id="memset async"),
    pytest.param("    cudaMemcpyToSymbol(table, host, sizeof(host));", id="memcpy to symbol"),
    pytest.param("    // cudaMemset(y.data_ptr<float>(), 0, n * sizeof(float));", id="memset in a comment"),
]


@pytest.mark.parametrize("body", UNTOUCHED)
def test_launches_on_a_stream_of_their_own_or_in_comments_are_left_alone(body):
    src = candidate(body)
    assert launch_on_current_stream(src) == (src, 0)


def test_a_launch_on_a_stream_variable_is_not_moved_and_is_named_in_what_remains():
    own = f"    relu_kernel<<<blocks, threads, 0, my_stream>>>({ARGS});"
    assert rewrite_streams(candidate(own)).own_stream == ["my_stream"]
    current = "    cudaStream_t my_stream = at::cuda::getCurrentCUDAStream();\n" + own
    assert (rewrite_streams(candidate(current)).own_stream, rewrite_streams(candidate(current)).current) == ([], 1)
    v = Verdict(status=Status.incorrect, failed_check="current_stream")
    assert repair_candidate(candidate(own), v) is None  # nothing it may move
    r = repair_candidate(candidate(own + f"\n    relu_kernel<<<blocks, threads>>>({ARGS});"), v)
    assert r is not None and r.fixes[0].detail.startswith("1 kernel launch moved")
    assert "1 launch on a stream of its own (my_stream) not moved" in r.remaining
    assert "0, my_stream>>>" in r.source


def test_device_side_launches_are_left_alone():
    body = (
        "__global__ void parent(const float* x, float* y, int n) {\n"
        "    relu_kernel<<<1, 32>>>(x, y, n);\n"
        "}\n"
        "torch::Tensor parent_cuda(torch::Tensor x) {\n"
        "    auto y = torch::empty_like(x);\n"
        "    parent<<<1, 1>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());\n"
        "    return y;\n"
        "}"
    )
    src = candidate(body)
    rw = rewrite_streams(src)
    assert rw.launches == 1 and rw.device_side == 1
    assert "relu_kernel<<<1, 32>>>(x, y, n);" in rw.source
    assert f"parent<<<1, 1, 0, {S}>>>" in rw.source


def test_memset_and_memcpy_become_async_on_the_current_stream():
    body = (
        "    cudaMemset(y.data_ptr<float>(), 0, n * sizeof(float));\n"
        "    C10_CUDA_CHECK(cudaMemcpy(y.data_ptr<float>(), x.data_ptr<float>(),\n"
        "                              n * sizeof(float), cudaMemcpyDeviceToDevice));"
    )
    want = (
        f"    cudaMemsetAsync(y.data_ptr<float>(), 0, n * sizeof(float), {S});\n"
        "    C10_CUDA_CHECK(cudaMemcpyAsync(y.data_ptr<float>(), x.data_ptr<float>(),\n"
        f"                              n * sizeof(float), cudaMemcpyDeviceToDevice, {S}));"
    )
    rw = rewrite_streams(candidate(body))
    assert rw.source == candidate(want)
    assert (rw.memsets, rw.memcpys, rw.launches) == (1, 1, 0)
    assert "cudaMemsetAsync" in rw.describe() and "cudaMemcpyAsync" in rw.describe()


def test_the_stream_header_goes_after_the_last_include():
    src = candidate(
        f"    relu_kernel<<<blocks, threads>>>({ARGS});",
        includes="#include <torch/extension.h>\n#include <cuda_runtime.h>\n",
    )
    rw = rewrite_streams(src)
    assert rw.includes == 1
    (cuda,) = [s for s in strings(rw.source) if "__global__" in s]
    assert cuda.startswith("\n#include <torch/extension.h>\n#include <cuda_runtime.h>\n" + INCLUDE + "\n\n__global__")
    assert "stream" in rw.describe() and INCLUDE[len("#include ") :] in rw.describe()


def test_the_stream_header_goes_on_top_when_there_is_no_include():
    src = candidate(f"    relu_kernel<<<blocks, threads>>>({ARGS});", includes="")
    (cuda,) = [s for s in strings(launch_on_current_stream(src)[0]) if "__global__" in s]
    assert cuda.startswith("\n" + INCLUDE + "\n\n__global__")


def test_the_stream_header_is_not_added_twice_nor_without_a_change():
    src = candidate(f"    relu_kernel<<<blocks, threads>>>({ARGS});")  # includes it already
    new, _ = launch_on_current_stream(src)
    assert new.count(INCLUDE) == 1
    untouched = candidate(
        f"    relu_kernel<<<blocks, threads, 0, stream>>>({ARGS});", includes="#include <torch/extension.h>\n"
    )
    assert INCLUDE not in launch_on_current_stream(untouched)[0]


def test_a_non_raw_one_line_string_gets_escaped_newlines():
    src = (
        "import torch\n"
        "from torch.utils.cpp_extension import load_inline\n"
        'SRC = "#include <torch/extension.h>\\n__global__ void k(float* y) { y[0] = 1.f; }\\n'
        'void run(torch::Tensor y) { k<<<1, 1>>>(y.data_ptr<float>()); }\\n"\n'
        'ext = load_inline(name="k", cpp_sources="void run(torch::Tensor y);", cuda_sources=SRC, functions=["run"])\n'
    )
    new, n = launch_on_current_stream(src)
    assert n == 1
    (value,) = [s for s in strings(new) if "__global__" in s]
    assert value == (
        "#include <torch/extension.h>\n" + INCLUDE + "\n__global__ void k(float* y) { y[0] = 1.f; }\n"
        f"void run(torch::Tensor y) {{ k<<<1, 1, 0, {S}>>>(y.data_ptr<float>()); }}\n"
    )
    assert new.count("\n") == src.count("\n")  # the newline went in as an escape, the string stays on its line


def test_implicitly_concatenated_strings_are_edited_piece_by_piece():
    src = (
        "import torch\n"
        "cuda_src = (\n"
        '    "#include <torch/extension.h>\\n"  # the header\n'
        '    "__global__ void k(float* y) { y[0] = 1.f; }\\n"\n'
        "    'void run(torch::Tensor y) { k<<<1, 1>>>(y.data_ptr<float>()); }\\n'\n"
        ")\n"
    )
    new, n = launch_on_current_stream(src)
    assert n == 1
    assert "# the header" in new
    (value,) = [s for s in strings(new) if "__global__" in s]
    assert INCLUDE + "\n__global__" in value and f"k<<<1, 1, 0, {S}>>>" in value


def test_utf8_before_the_literal_and_inside_it_keeps_the_offsets_right():
    src = (
        "import torch\n"
        'names, src = ("é→ü", r"""\n'
        "// timing: 3 µs per call — ünïcode\n"
        "__global__ void k(float* y) { y[0] = 1.f; }\n"
        "void run(torch::Tensor y) { k<<<1, 1>>>(y.data_ptr<float>()); }\n"
        '""")\n'
    )
    new, _ = launch_on_current_stream(src)
    assert f"k<<<1, 1, 0, {S}>>>(y.data_ptr<float>()); }}\n" in new
    assert '("é→ü", r"""\n' + INCLUDE + "\n// timing: 3 µs" in new


def test_crlf_files_stay_crlf():
    src = candidate(
        f"    relu_kernel<<<blocks, threads>>>({ARGS});", includes="#include <torch/extension.h>\n"
    ).replace("\n", "\r\n")
    new, _ = launch_on_current_stream(src)
    assert INCLUDE + "\r\n" in new
    assert "\n" not in new.replace("\r\n", "")


def test_docstrings_and_f_strings_are_not_rewritten():
    src = (
        '"""Launches relu_kernel<<<blocks, threads>>>: see __global__ below."""\n'
        "import torch\n"
        "n = 256\n"
        'SRC = f"""\n'
        "__global__ void k(float* y) {{ y[0] = 1.f; }}\n"
        "void run(torch::Tensor y) {{ k<<<{n}, 1>>>(y.data_ptr<float>()); }}\n"
        '"""\n'
    )
    rw = rewrite_streams(src)
    assert rw.source == src and rw.changed == 0
    assert rw.legacy_left == 1


def test_everything_outside_the_edits_is_kept_byte_for_byte():
    body = (
        "    relu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);  // fast path\n"
        "    relu_kernel<float><<<dim3(blocks), threads, 0, 0>>>(\n"
        "        x.data_ptr<float>(), y.data_ptr<float>(), n);\n"
        "    cudaMemset(y.data_ptr<float>(), 0, 4);"
    )
    src = candidate(body, includes="#include <torch/extension.h>\n") + "# trailing comment   \n\n\n"
    new, n = launch_on_current_stream(src)
    assert n == 3
    undone = (
        new.replace(f", 0, {S}", "", 1)
        .replace(f", 0, {S}", ", 0, 0", 1)
        .replace("cudaMemsetAsync", "cudaMemset")
        .replace(f", {S}", "")
        .replace(INCLUDE + "\n", "")
    )
    assert undone == src


def test_the_stream_repair_is_idempotent():
    src = candidate(
        f"    relu_kernel<<<blocks, threads>>>({ARGS});\n    cudaMemset(y.data_ptr<float>(), 0, 4);", includes=""
    )
    once, n1 = launch_on_current_stream(src)
    twice, n2 = launch_on_current_stream(once)
    assert n1 == 2 and n2 == 0 and twice == once


# --- scalar_type ------------------------------------------------------------------------------------------------------

SCALAR_FORMS = [
    pytest.param(
        'AT_DISPATCH_FLOATING_TYPES(x.type(), "relu_cuda", ([&] {',
        'AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu_cuda", ([&] {',
        id="AT_DISPATCH x.type()",
    ),
    pytest.param(
        'AT_DISPATCH_FLOATING_TYPES_AND_HALF(input_tensor.type(), "relu_cuda", ([&] {',
        'AT_DISPATCH_FLOATING_TYPES_AND_HALF(input_tensor.scalar_type(), "relu_cuda", ([&] {',
        id="AT_DISPATCH_AND_HALF input_tensor.type()",
    ),
    pytest.param(
        'AT_DISPATCH_ALL_TYPES(a[0].type(), "relu_cuda", ([&] {',
        'AT_DISPATCH_ALL_TYPES(a[0].scalar_type(), "relu_cuda", ([&] {',
        id="AT_DISPATCH a[0].type()",
    ),
    pytest.param(
        'AT_DISPATCH_FLOATING_TYPES(\n        x.contiguous().type(), "relu_cuda", ([&] {',
        'AT_DISPATCH_FLOATING_TYPES(\n        x.contiguous().scalar_type(), "relu_cuda", ([&] {',
        id="AT_DISPATCH multi-line x.contiguous().type()",
    ),
    pytest.param(
        'TORCH_CHECK(x.type().scalarType() == at::kFloat, "float");\n    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "r", ([&] {',
        'TORCH_CHECK(x.scalar_type() == at::kFloat, "float");\n    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "r", ([&] {',
        id=".type().scalarType()",
    ),
    pytest.param(
        'TORCH_CHECK(x.type().scalar_type() == at::kFloat, "float");\n    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "r", ([&] {',
        'TORCH_CHECK(x.scalar_type() == at::kFloat, "float");\n    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "r", ([&] {',
        id=".type().scalar_type()",
    ),
    pytest.param(
        'TORCH_CHECK(x.type().is_cuda(), "x must be CUDA");\n    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "r", ([&] {',
        'TORCH_CHECK(x.is_cuda(), "x must be CUDA");\n    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "r", ([&] {',
        id=".type().is_cuda()",
    ),
]


def dispatch_candidate(head: str, data: str = "data_ptr") -> str:
    body = (
        f"    {head}\n"
        "        relu_kernel_t<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(\n"
        f"            x.{data}<scalar_t>(), y.{data}<scalar_t>(), n);\n"
        "    }));"
    )
    return candidate(body)


@pytest.mark.parametrize(("before", "after"), SCALAR_FORMS)
def test_deprecated_type_forms_are_rewritten(before, after):
    new, n = scalar_type_dispatch(dispatch_candidate(before))
    assert new == dispatch_candidate(after)
    assert n == 1


def test_data_template_becomes_data_ptr_and_is_counted():
    head = 'AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "r", ([&] {'
    new, n = scalar_type_dispatch(dispatch_candidate(head, data="data"))
    assert new == dispatch_candidate(head, data="data_ptr")
    assert n == 2
    nested = candidate("    auto* p = x.data<c10::complex<float>>();\n    auto* q = x.data_ptr<float>();")
    new, n = scalar_type_dispatch(nested)
    assert n == 1 and "x.data_ptr<c10::complex<float>>();" in new and "x.data_ptr<float>();" in new


def test_type_calls_in_comments_and_other_forms_stay():
    body = (
        '    // AT_DISPATCH_FLOATING_TYPES(x.type(), "old", ...)\n'
        '    TORCH_CHECK(x.type().backend() == at::Backend::CUDA, "cuda");\n'
        '    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "r", ([&] {}));'
    )
    src = candidate(body)
    assert scalar_type_dispatch(src) == (src, 0)


def test_scalar_type_preserves_the_rest_and_is_idempotent():
    src = dispatch_candidate('AT_DISPATCH_FLOATING_TYPES(x.type(), "relu_cuda", ([&] {', data="data")
    once, n = scalar_type_dispatch(src)
    assert n == 3
    assert once.replace("scalar_type()", "type()").replace("data_ptr<scalar_t>", "data<scalar_t>") == src
    assert scalar_type_dispatch(once) == (once, 0)


# --- contiguous_inputs -----------------------------------------------------------------------------------------------

MODEL = '''"""A fused bias add (model-written)."""

from __future__ import annotations

import torch
import torch.nn as nn

from ext import fused


class ModelNew(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x: torch.Tensor, scale: float = 1.0, y: torch.Tensor | None = None) -> torch.Tensor:
        """Adds the bias.

        Multi-line docstring.
        """
        # the kernel
        return fused.run(x, scale, y, self.bias)
'''


def test_contiguous_with_input_specs_touches_the_tensor_positions_only():
    new = contiguous_inputs(MODEL, {0, 2})
    assert new == MODEL.replace(
        '        """\n        # the kernel',
        f'        """\n        {CONTIGUOUS_MARK}\n        x = x.contiguous()\n        y = y.contiguous()\n        # the kernel',
    )
    parse(new)


def test_contiguous_without_specs_guards_every_positional_parameter():
    new = contiguous_inputs(MODEL, None)
    assert new is not None
    assert (
        f'        """\n        {CONTIGUOUS_MARK}\n'
        "        x = x.contiguous() if isinstance(x, torch.Tensor) else x\n"
        "        scale = scale.contiguous() if isinstance(scale, torch.Tensor) else scale\n"
        "        y = y.contiguous() if isinstance(y, torch.Tensor) else y\n"
        "        # the kernel\n"
    ) in new
    assert new.count("import torch\n") == 1


def test_contiguous_uses_the_name_torch_was_imported_under():
    src = MODEL.replace("import torch\n", "import torch as T\n").replace("torch.", "T.")
    new = contiguous_inputs(src, None)
    assert new is not None
    assert "x = x.contiguous() if isinstance(x, T.Tensor) else x\n" in new
    assert "import torch\n" not in new


def test_contiguous_imports_torch_after_the_docstring_and_future_imports_when_needed():
    src = (
        '"""Candidate."""\n'
        "from __future__ import annotations\n"
        "\n"
        "from torch import nn\n"
        "import ext\n"
        "\n"
        "\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x, w):\n"
        "        return ext.run(x, w)\n"
    )
    new = contiguous_inputs(src, None)
    assert new == (
        '"""Candidate."""\n'
        "from __future__ import annotations\n"
        "import torch\n"
        "\n"
        "from torch import nn\n"
        "import ext\n"
        "\n"
        "\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x, w):\n"
        f"        {CONTIGUOUS_MARK}\n"
        "        x = x.contiguous() if isinstance(x, torch.Tensor) else x\n"
        "        w = w.contiguous() if isinstance(w, torch.Tensor) else w\n"
        "        return ext.run(x, w)\n"
    )
    # with the specs, no guard and so no import is needed
    assert "import torch\n" not in contiguous_inputs(src, {0, 1})


def test_contiguous_handles_star_args():
    src = "import torch\nimport ext\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, *inputs):\n        return ext.run(*inputs)\n"
    want = (
        f"        {CONTIGUOUS_MARK}\n"
        "        inputs = tuple(a.contiguous() if isinstance(a, torch.Tensor) else a for a in inputs)\n"
        "        return ext.run(*inputs)\n"
    )
    assert contiguous_inputs(src, None).endswith(want)
    assert contiguous_inputs(src, {0, 1}).endswith(want)  # specs beyond the named parameters: *inputs


def test_contiguous_does_not_apply_without_model_new_forward_or_on_a_one_line_forward():
    assert (
        contiguous_inputs(
            "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n", None
        )
        is None
    )
    assert contiguous_inputs("import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n", None) is None
    one_line = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x): return x + 1\n"
    assert contiguous_inputs(one_line, None) is None
    assert contiguous_inputs(MODEL, {5}) is None  # no parameter there, and no *args to take it
    assert contiguous_inputs(MODEL, set()) is None


def test_contiguous_is_idempotent():
    once = contiguous_inputs(MODEL, {0})
    assert once is not None
    assert contiguous_inputs(once, {0}) is None


def test_tensor_positions_come_from_the_first_input_set():
    specs = [
        InputSpec(case="seed0", index=0, dtype="float32", shape=[4, 4]),
        InputSpec(case="seed0", index=1, python_type="float"),
        InputSpec(case="seed0", index=2, dtype="float16", shape=[4]),
        InputSpec(case="N=7", index=1, dtype="float32", shape=[7]),
    ]
    assert tensor_positions(specs) == {0, 2}
    assert tensor_positions([]) is None


# --- the decision table ----------------------------------------------------------------------------------------------

LEGACY = candidate(f"    relu_kernel<<<blocks, threads>>>({ARGS});", includes="#include <torch/extension.h>\n")
CURRENT = candidate(f"    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>({ARGS});")
OLD_TORCH = candidate(
    '    AT_DISPATCH_FLOATING_TYPES(x.type(), "relu", ([&] {\n'
    "        relu_kernel<<<blocks, threads>>>(x.data<float>(), y.data<float>(), n);\n"
    "    }));",
    includes="#include <torch/extension.h>\n",
)


def streams_narrowed() -> Domain:
    return Domain(
        layouts="any",
        streams="default",
        narrowed=[
            Narrowing(
                check="current_stream",
                axis="streams",
                found="wrong_values",
                detail="read the inputs before they were ready",
                repair="current_stream",
            )
        ],
    )


def layouts_narrowed(found: str = "wrong_values") -> Domain:
    return Domain(
        layouts="contiguous",
        streams="any",
        narrowed=[
            Narrowing(
                check="noncontiguous_inputs",
                axis="layouts",
                found=found,
                detail="strided x",
                repair="contiguous_inputs",
            )
        ],
    )


SPECS = [InputSpec(case="seed0", index=0, dtype="float32", shape=[64])]


def kinds(r: Repair | None) -> list[str] | None:
    return None if r is None else [f.kind for f in r.fixes]


def test_correct_on_the_full_domain_needs_nothing():
    v = Verdict(status=Status.correct, domain=Domain(layouts="any", streams="any"))
    assert repair_candidate(LEGACY, v) is None
    assert repair_candidate(OLD_TORCH, v) is None


def test_a_streams_narrowing_gets_the_stream_repair_only():
    r = repair_candidate(LEGACY, Verdict(status=Status.correct, domain=streams_narrowed(), inputs=SPECS))
    assert kinds(r) == ["current_stream"]
    assert (
        r.fixes[0].detail
        == f"1 kernel launch moved to the current stream ({S}); #include <c10/cuda/CUDAStream.h> added"
    )
    assert f"relu_kernel<<<blocks, threads, 0, {S}>>>" in r.source
    parse(r.source)
    # the domain alone says so too, without a narrowing listed
    v = Verdict(status=Status.correct, domain=Domain(layouts="any", streams="default"))
    assert kinds(repair_candidate(LEGACY, v)) == ["current_stream"]


def test_a_narrowing_check_alone_asks_for_its_repair():
    v = Verdict(status=Status.correct, checks=[Check(name="current_stream", passed=True, narrows="streams")])
    assert kinds(repair_candidate(LEGACY, v)) == ["current_stream"]


def test_strict_mode_failures_get_their_repairs():
    v = Verdict(status=Status.incorrect, failed_check="current_stream", inputs=SPECS)
    assert kinds(repair_candidate(LEGACY, v)) == ["current_stream"]
    v = Verdict(status=Status.incorrect, failed_check="noncontiguous_inputs", inputs=SPECS)
    r = repair_candidate(CURRENT, v)
    assert kinds(r) == ["contiguous_inputs"]
    assert r.fixes[0].detail == "1 tensor input (x) made contiguous at the top of ModelNew.forward"
    assert f"        {CONTIGUOUS_MARK}\n        x = x.contiguous()\n        return" in r.source


@pytest.mark.parametrize("found", ["wrong_values", "refused"])
def test_a_layouts_narrowing_gets_contiguous_inputs_and_the_stream_repair_rides_along(found):
    v = Verdict(status=Status.correct, domain=layouts_narrowed(found), inputs=SPECS)
    assert kinds(repair_candidate(CURRENT, v)) == ["contiguous_inputs"]  # its launches are right already
    r = repair_candidate(LEGACY, v)
    assert kinds(r) == ["contiguous_inputs", "current_stream"]  # repaired anyway: the legacy launch moves too
    assert "x = x.contiguous()\n" in r.source and f"0, {S}>>>" in r.source


def test_a_failure_no_repair_addresses_gets_none():
    v = Verdict(status=Status.incorrect, failed_check="outputs_match", domain=Domain(layouts="any", streams="any"))
    assert repair_candidate(LEGACY, v) is None
    assert repair_candidate(LEGACY, Verdict(status=Status.runtime_error, reason="illegal memory access")) is None
    assert repair_candidate(LEGACY, Verdict(status=Status.compile_error, reason="expected ';'")) is None


def test_a_compile_error_on_old_torch_gets_every_repair():
    r = repair_candidate(OLD_TORCH, Verdict(status=Status.compile_error, reason="no member named 'data'"))
    assert kinds(r) == ["scalar_type", "contiguous_inputs", "current_stream"]
    assert r.fixes[0].detail.startswith("3 deprecated tensor calls rewritten for current torch")
    assert "x.scalar_type()" in r.source and "x.data_ptr<float>(), y.data_ptr<float>()" in r.source
    assert "x = x.contiguous() if isinstance(x, torch.Tensor) else x\n" in r.source  # no specs: guarded
    assert f"relu_kernel<<<blocks, threads, 0, {S}>>>" in r.source
    assert INCLUDE in r.source
    parse(r.source)
    # the same source, but the wrapper makes its input contiguous itself: no contiguous repair
    own = OLD_TORCH.replace("auto y = torch::empty_like(x);", "x = x.contiguous();\n    auto y = torch::empty_like(x);")
    assert kinds(repair_candidate(own, Verdict(status=Status.compile_error))) == ["scalar_type", "current_stream"]


def test_scalar_type_applies_whatever_the_status():
    r = repair_candidate(OLD_TORCH, Verdict(status=Status.runtime_error))
    assert kinds(r) == ["scalar_type", "current_stream"]  # not a compile error: no static contiguous repair


def test_already_applied_kinds_are_not_applied_again_and_round_two_gives_none():
    v = Verdict(status=Status.compile_error)
    first = repair_candidate(OLD_TORCH, v)
    assert first is not None
    assert repair_candidate(first.source, v, already=first.kinds) is None
    assert repair_candidate(first.source, v) is None  # each fix finds its own work done
    skip = repair_candidate(OLD_TORCH, v, already=["current_stream"])
    assert kinds(skip) == ["scalar_type", "contiguous_inputs"]
    assert f"0, {S}>>>" not in skip.source
    v = Verdict(status=Status.correct, domain=layouts_narrowed(), inputs=SPECS)
    once = repair_candidate(LEGACY, v)
    assert repair_candidate(once.source, v, already=once.kinds) is None


def test_what_the_stream_repair_cannot_move_is_said():
    src = (
        LEGACY.replace("import torch\n", "import torch\nimport cupy\n", 1)
        + "\n\n_k = cupy.RawKernel(r'extern \"C\" __global__ void k(float* y) { y[0] = 1.f; }', 'k')\n"
    )
    src = src.replace(
        "    return y;\n}\n",
        "    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &a, p, 1, q, 1, &b, r, 1);\n    return y;\n}\n",
        1,
    )
    r = repair_candidate(src, Verdict(status=Status.correct, domain=streams_narrowed()))
    assert kinds(r) == ["current_stream"]
    assert any("cupy.RawKernel" in m for m in r.remaining)
    assert any("cublasSetStream" in m for m in r.remaining)
    assert not any("cuLaunchKernel" in m or "stream=0" in m for m in r.remaining)
    nvrtc = LEGACY + "\n\ndef launch(k, x):\n    k(grid=(1,), block=(32,), args=(x,), stream=0)\n"
    nvrtc = nvrtc.replace("    int n = x.numel();", "    int n = x.numel();\n    cudaStream_t stream = 0;")
    r = repair_candidate(nvrtc, Verdict(status=Status.correct, domain=streams_narrowed()))
    assert [m for m in r.remaining if "stream=0" in m] == [
        "NVRTC launches with stream=0 stay on the legacy default stream: pass torch.cuda.current_stream().cuda_stream"
    ]
    # a C++ `stream = 0` is not an NVRTC launch
    r = repair_candidate(nvrtc.split("\n\ndef launch")[0], Verdict(status=Status.correct, domain=streams_narrowed()))
    assert not any("stream=0" in m for m in r.remaining)
    # nothing the repair can move: None, whatever the verdict asks
    raw_only = "import cupy\nimport torch\n\nk = cupy.RawKernel(r'extern \"C\" __global__ void k() {}', 'k')\n"
    assert repair_candidate(raw_only, Verdict(status=Status.correct, domain=streams_narrowed())) is None


def test_the_contiguous_repair_names_inputs_it_leaves():
    src = MODEL.replace("y: torch.Tensor | None = None)", "y: torch.Tensor | None = None, *, out=None)")
    r = repair_candidate(src, Verdict(status=Status.incorrect, failed_check="noncontiguous_inputs"))
    assert kinds(r) == ["contiguous_inputs"]
    assert any("keyword-only" in m for m in r.remaining)


def test_an_unparseable_candidate_gets_none():
    assert repair_candidate("def forward(:\n", Verdict(status=Status.compile_error)) is None


def test_repair_results_are_pydantic_models():
    r = repair_candidate(LEGACY, Verdict(status=Status.correct, domain=streams_narrowed()))
    again = Repair.model_validate_json(r.model_dump_json())
    assert again == r


def test_escapes_in_a_non_raw_string_keep_the_edits_in_place():
    src = (
        "import torch\n"
        'SRC = """\n'
        "#include <torch/extension.h>\n"
        "#include <cstdio>\n"
        "__global__ void k(float* y) { y[0] = 1.f; }\n"
        "void run(torch::Tensor y) {\n"
        '    printf(\\"launch\\\\t%d\\\\n\\", 1); // \\u00b5s \\x41\n'
        "    k<<<1, 1>>>(y.data<float>());\n"
        "}\n"
        '"""\n'
    )
    (before,) = strings(src)
    new, n = launch_on_current_stream(scalar_type_dispatch(src)[0])
    assert n == 1
    (after,) = strings(new)
    assert after == before.replace("#include <cstdio>\n", "#include <cstdio>\n" + INCLUDE + "\n").replace(
        "k<<<1, 1>>>(y.data<float>())", f"k<<<1, 1, 0, {S}>>>(y.data_ptr<float>())"
    )
    assert '\\"launch\\\\t%d\\\\n\\", 1); // \\u00b5s \\x41\n' in new  # the escapes as written


def test_a_large_candidate_is_repaired_quickly():
    import time

    launch = f"    relu_kernel<<<blocks, threads>>>({ARGS});  // é\n"
    src = candidate(launch * 3000)  # ~250 kB of CUDA in one string
    t = time.perf_counter()
    new, n = launch_on_current_stream(src)
    assert n == 3000
    assert time.perf_counter() - t < 5


def test_a_failed_verdicts_unfinished_domain_asks_for_no_repair():
    """A verdict that failed before its stream probe ran still states the default stream it was verified on so
    far; that is no limit found, and a kernel rejected for wrong values gets no repair from it."""

    source = 'SRC = """\n__global__ void k(float* x) {}\nvoid f(float* x) { k<<<1, 32>>>(x); }\n"""\n'
    failed = Verdict(status=Status.incorrect, failed_check="outputs_match", domain=Domain(streams="default"))
    assert repair_candidate(source, failed) is None
    narrowed = Verdict(status=Status.correct, domain=Domain(layouts="any", streams="default"))
    assert [f.kind for f in repair_candidate(source, narrowed).fixes] == ["current_stream"]


def test_a_verdict_that_narrowed_and_then_failed_asks_for_no_repair():
    """On a GPU the legacy-stream kernel narrows the streams first and then fails for another cause (wrong values at
    forge's sizes, a mutated input): its narrowings were found, but no mechanical repair fixes what it failed for."""

    source = 'SRC = """\n__global__ void k(float* x) {}\nvoid f(float* x) { k<<<1, 32>>>(x); }\n"""\n'
    for status, check in [
        (Status.incorrect, "other_sizes"),
        (Status.incorrect, "inputs_unchanged"),
        (Status.runtime_error, None),
    ]:
        failed = Verdict(status=status, failed_check=check, domain=streams_narrowed())
        assert repair_candidate(source, failed) is None, (status, check)
    strict = Verdict(status=Status.incorrect, failed_check="current_stream", domain=Domain(streams="default"))
    assert [f.kind for f in repair_candidate(source, strict).fixes] == ["current_stream"]
