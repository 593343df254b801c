"""Candidate loading helpers that need no build."""


def test_lighter_cuda_headers_rewrite():
    from forge_lsp.engine.harness.loading import lighter_cuda_headers

    src = "#include <torch/extension.h>\n__global__ void k() {}\n"
    assert lighter_cuda_headers(src) == "#include <torch/types.h>\n__global__ void k() {}\n"
    assert lighter_cuda_headers([src])[0].startswith("#include <torch/types.h>")
    assert lighter_cuda_headers(src + "PYBIND11_MODULE(x, m) {}") is None  # needs the full header
    assert lighter_cuda_headers("__global__ void k() {}") is None
    assert lighter_cuda_headers(None) is None
