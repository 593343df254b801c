# ---- forge offline library: RMS norm over the trailing dims --------------------------------
import torch
import triton
import triton.language as tl

# forge:dev-only-begin
from forge_lsp.agent.offline.library.common import _forge_fallback, _forge_ok, _forge_warps
from forge_lsp.agent.offline.library.seg_norm import _forge_seg_norm

# forge:dev-only-end

#: Longest row normalized from registers; longer rows use the segment kernels.
FORGE_RMS_NORM_MAX_BLOCK = 8192


@triton.jit
def _forge_rms_norm_rows_kernel(
    x_ptr, w_ptr, y_ptr, n_rows, n_cols, eps, HAS_W: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr
):
    # ROWS whole rows per program in registers: one read, one write.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    cmask = cols < n_cols
    mask = (rows < n_rows)[:, None] & cmask[None, :]
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = x * tl.math.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)[:, None]
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def forge_rms_norm(x, normalized_shape, weight=None, eps=None, _max_block=None, _split=None, _block=None):
    """F.rms_norm with Triton (eps=None means torch.finfo(x.dtype).eps, as in torch)."""
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (list, tuple, torch.Size)) else (normalized_shape,)
    k = len(shape)
    params = [weight] if weight is not None else []
    if (
        k == 0
        or x.dim() < k
        or tuple(x.shape[x.dim() - k :]) != shape
        or not _forge_ok(x, *params)
        or any(tuple(p.shape) != shape for p in params)
    ):
        return _forge_fallback(torch.nn.functional.rms_norm, x, shape, weight, eps)
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    n_cols = 1
    for s in shape:
        n_cols *= s
    n_rows = x.numel() // n_cols
    block = triton.next_power_of_2(n_cols)
    if block > (_max_block or FORGE_RMS_NORM_MAX_BLOCK):
        return _forge_seg_norm(x, n_rows, n_cols, 1, n_cols, 1, weight, None, eps, True, split=_split, block=_block)
    y = torch.empty_like(x)
    rows = max(1, min(triton.next_power_of_2(n_rows), 2048 // block))
    _forge_rms_norm_rows_kernel[(triton.cdiv(n_rows, rows),)](
        x,
        weight if weight is not None else x,
        y,
        n_rows,
        n_cols,
        eps,
        HAS_W=weight is not None,
        ROWS=rows,
        BLOCK=block,
        num_warps=_forge_warps(rows * block),
    )
    return y
