import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void sub_mul_relu_kernel(const float* input, float* output, float subtract_value, float multiply_value, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float val = (input[idx] - subtract_value) * multiply_value;
        output[idx] = fmaxf(val, 0.0f);
    }
}

torch::Tensor sub_mul_relu_cuda(torch::Tensor input, float subtract_value, float multiply_value) {
    auto output = torch::empty_like(input);
    int size = input.numel();
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    sub_mul_relu_kernel<<<num_blocks, block_size>>>(input.data_ptr<float>(), output.data_ptr<float>(), subtract_value, multiply_value, size);
    return output;
}
"""

fused_cpp_source = "torch::Tensor sub_mul_relu_cuda(torch::Tensor input, float subtract_value, float multiply_value);"

sub_mul_relu = load_inline(
    name="linear_sub_mul_relu",
    cpp_sources=fused_cpp_source,
    cuda_sources=fused_source,
    functions=["sub_mul_relu_cuda"],
    verbose=False,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value
        self.sub_mul_relu = sub_mul_relu

    def forward(self, x):
        x = self.linear(x)
        x = self.sub_mul_relu.sub_mul_relu_cuda(x, self.subtract_value, self.multiply_value)
        return x
