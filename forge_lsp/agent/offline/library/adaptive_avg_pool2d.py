# ---- forge offline library: adaptive average pooling 2d (N, C, H, W) ------------------------
import torch
import triton
import triton.language as tl

# forge:dev-only-begin
from forge_lsp.agent.offline.library.common import _forge_fallback, _forge_ok, _forge_warps

# forge:dev-only-end


@triton.jit
def _forge_global_avg_pool_kernel(x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # Output (1, 1): the mean of each contiguous H*W plane; ROWS planes per program.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < n_rows
    cols = tl.arange(0, BLOCK)
    base = rows.to(tl.int64)[:, None] * n_cols
    acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        acc += tl.load(x_ptr + base + c[None, :], mask=rmask[:, None] & (c < n_cols)[None, :], other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=1) / n_cols
    tl.store(y_ptr + rows, mean.to(y_ptr.dtype.element_ty), mask=rmask)


@triton.jit
def _forge_adaptive_avg_pool_kernel(
    x_ptr, y_ptr, n_rows, H, W, OH, OW, KH: tl.constexpr, ROWS: tl.constexpr, BLOCK_KW: tl.constexpr
):
    # General output size: program (row block, output cell) averages the cell's window
    # [floor(i*H/OH), ceil((i+1)*H/OH)) x [floor(j*W/OW), ceil((j+1)*W/OW)) of ROWS planes.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cell = tl.program_id(1)
    oh = cell // OW
    ow = cell % OW
    hs = (oh * H) // OH
    he = ((oh + 1) * H + OH - 1) // OH
    ws = (ow * W) // OW
    we = ((ow + 1) * W + OW - 1) // OW
    rmask = rows < n_rows
    kw = tl.arange(0, BLOCK_KW)
    wmask = (ws + kw) < we
    base = rows.to(tl.int64)[:, None] * (H * W) + ws + kw[None, :]
    acc = tl.zeros([ROWS, BLOCK_KW], dtype=tl.float32)
    for kh in range(0, KH):
        h = hs + kh
        m = rmask[:, None] & (wmask & ((h + kw * 0) < he))[None, :]
        acc += tl.load(x_ptr + base + h * W, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=1) / ((he - hs) * (we - ws)).to(tl.float32)
    tl.store(y_ptr + rows.to(tl.int64) * (OH * OW) + cell, mean.to(y_ptr.dtype.element_ty), mask=rmask)


def _forge_max_window(n, out):
    return max(((i + 1) * n + out - 1) // out - (i * n) // out for i in range(out))


def forge_adaptive_avg_pool2d(x, output_size):
    """F.adaptive_avg_pool2d with Triton for contiguous (N, C, H, W) or (C, H, W) inputs."""
    size = tuple(output_size) if isinstance(output_size, (list, tuple, torch.Size)) else (output_size, output_size)
    if (
        len(size) != 2
        or any(not isinstance(s, int) or s <= 0 for s in size)
        or size[0] * size[1] > 65535
        or x.dim() not in (3, 4)
        or not _forge_ok(x)
    ):
        return _forge_fallback(torch.nn.functional.adaptive_avg_pool2d, x, output_size)
    H, W = x.shape[-2], x.shape[-1]
    OH, OW = size
    n_rows = x.numel() // (H * W)
    y = torch.empty(x.shape[:-2] + (OH, OW), device=x.device, dtype=x.dtype)
    if OH == 1 and OW == 1:
        hw = H * W
        block = min(triton.next_power_of_2(hw), 1024)
        rows = max(1, min(triton.next_power_of_2(n_rows), 2048 // block))
        _forge_global_avg_pool_kernel[(triton.cdiv(n_rows, rows),)](
            x, y, n_rows, hw, ROWS=rows, BLOCK=block, num_warps=_forge_warps(rows * block)
        )
        return y
    kh, kw = _forge_max_window(H, OH), _forge_max_window(W, OW)
    block_kw = triton.next_power_of_2(kw)
    rows = max(1, min(triton.next_power_of_2(n_rows), 1024 // block_kw))
    _forge_adaptive_avg_pool_kernel[(triton.cdiv(n_rows, rows), OH * OW)](
        x, y, n_rows, H, W, OH, OW, KH=kh, ROWS=rows, BLOCK_KW=block_kw, num_warps=4
    )
    return y
