"""Triton sum reduction over one dimension (moved last if needed); one program per row,
looping over the row in BLOCK-wide tiles with a vector accumulator, then a tree sum.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_sum_kernel(x_ptr, y_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        acc += tl.load(x_row + c, mask=c < n_cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


ROW_BLOCK = 4096  # tile width of the column loop
NUM_WARPS = 8


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim % x.dim()
        if d != x.dim() - 1:
            x = x.movedim(d, -1)
        out_shape = x.shape[:-1]
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        n_rows = x2.shape[0]
        if n_cols == 0:
            return torch.zeros(out_shape, dtype=x.dtype, device=x.device)
        y = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        if n_rows > 0:
            block = min(ROW_BLOCK, triton.next_power_of_2(n_cols))
            _row_sum_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), BLOCK=block,
                                       num_warps=NUM_WARPS if block >= 2048 else 4)
        return y.view(out_shape)
