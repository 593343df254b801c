"""Triton LayerNorm over the last dimension (affine weight/bias, biased variance).

Rows up to MAX_BLOCK wide: one program per row, the row stays in registers (one read,
one write, two-pass mean/variance on registers).  Wider rows: tiled sum / centred
sum-of-squares / normalize passes over global memory.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK = 16384


@triton.jit
def _ln_row_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_y + cols, d * rstd * w + b, mask=mask)


@triton.jit
def _ln_tiled_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        acc += tl.load(x_row + c, mask=c < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        msk = c < n_cols
        x = tl.load(x_row + c, mask=msk, other=0.0)
        d = tl.where(msk, x - mean, 0.0)
        acc2 += d * d
    var = tl.sum(acc2, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        msk = c < n_cols
        x = tl.load(x_row + c, mask=msk, other=0.0)
        w = tl.load(w_ptr + c, mask=msk, other=0.0)
        b = tl.load(b_ptr + c, mask=msk, other=0.0)
        tl.store(y_row + c, (x - mean) * rstd * w + b, mask=msk)


def _num_warps(block):
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = self.ln.normalized_shape[-1]
        if x.shape[-1] != n_cols:
            raise ValueError("last dimension does not match normalized_shape")
        x2 = x.contiguous().view(-1, n_cols)
        n_rows = x2.shape[0]
        y = torch.empty_like(x2)
        w = self.ln.weight.contiguous()
        b = self.ln.bias.contiguous()
        if n_rows > 0:
            block = triton.next_power_of_2(n_cols)
            if block <= MAX_BLOCK:
                _ln_row_kernel[(n_rows,)](
                    x2, w, b, y, n_cols, x2.stride(0), y.stride(0), self.ln.eps,
                    BLOCK=block, num_warps=_num_warps(block),
                )
            else:
                _ln_tiled_kernel[(n_rows,)](
                    x2, w, b, y, n_cols, x2.stride(0), y.stride(0), self.ln.eps,
                    BLOCK=min(4096, MAX_BLOCK), num_warps=8,
                )
        return y.view(x.shape)
