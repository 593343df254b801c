# ---- forge offline library: softmax over the last dim ---------------------------------------
import torch
import triton
import triton.language as tl

# forge:dev-only-begin
from forge_lsp.agent.offline.library.common import _forge_fallback, _forge_ok, _forge_sm_count, _forge_warps

# forge:dev-only-end

#: Longest row kept whole in registers (fp32 after upcast); longer rows use the online kernels.
FORGE_SOFTMAX_MAX_BLOCK = 16384
#: Elements per loop step of the online kernels.
FORGE_SOFTMAX_CHUNK = 4096


@triton.jit
def _forge_softmax_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # ROWS whole rows per program, each read once and written once (rows packed when short).
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    rmask = rows < n_rows
    mask = rmask[:, None] & (cols < n_cols)[None, :]
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.where(rmask, tl.max(x, axis=1), 0.0)
    e = tl.exp(x - m[:, None])
    s = tl.where(rmask, tl.sum(e, axis=1), 1.0)
    y = e / s[:, None]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _forge_online_max_sum(ptr, start, stop, BLOCK: tl.constexpr):
    # Online softmax statistics of ptr[start:stop]: a running max and rescaled sum per lane
    # (one read), merged across lanes at the end. Returns (max, sum of exp(x - max)).
    cols = tl.arange(0, BLOCK)
    m_i = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
    d_i = tl.zeros([BLOCK], dtype=tl.float32)
    for i0 in range(start, stop, BLOCK):
        c = i0 + cols
        x = tl.load(ptr + c, mask=c < stop, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        seen = m_new > -float("inf")
        m_safe = tl.where(seen, m_new, 0.0)
        d_i = d_i * tl.exp(m_i - m_safe) + tl.where(seen, tl.exp(x - m_safe), 0.0)
        m_i = m_new
    m = tl.max(m_i, axis=0)
    d = tl.sum(tl.where(m_i > -float("inf"), d_i * tl.exp(m_i - m), 0.0), axis=0)
    return m, d


@triton.jit
def _forge_softmax_write(x_ptr, y_ptr, start, stop, m, inv, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for i0 in range(start, stop, BLOCK):
        c = i0 + cols
        mask = c < stop
        x = tl.load(x_ptr + c, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + c, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _forge_softmax_online_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # One program per long row: online statistics (one read), then normalize (read + write).
    base = tl.program_id(0).to(tl.int64) * n_cols
    m, d = _forge_online_max_sum(x_ptr + base, 0, n_cols, BLOCK)
    _forge_softmax_write(x_ptr + base, y_ptr + base, 0, n_cols, m, 1.0 / d, BLOCK)


@triton.jit
def _forge_softmax_partial_kernel(x_ptr, part_ptr, n_cols, chunk, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # Few long rows: program (row, s) writes the (max, sum) of its slice of the row.
    row = tl.program_id(0)
    s = tl.program_id(1)
    start = s * chunk
    m, d = _forge_online_max_sum(x_ptr + row.to(tl.int64) * n_cols, start, tl.minimum(start + chunk, n_cols), BLOCK)
    tl.store(part_ptr + (row * SPLIT + s) * 2, m)
    tl.store(part_ptr + (row * SPLIT + s) * 2 + 1, d)


@triton.jit
def _forge_softmax_split_apply_kernel(
    x_ptr, y_ptr, part_ptr, n_cols, chunk, used, SPLIT: tl.constexpr, BLOCK: tl.constexpr
):
    # Merge the row's partial (max, sum) pairs, then write this program's slice.
    row = tl.program_id(0)
    s = tl.program_id(1)
    k = tl.arange(0, SPLIT)
    ms = tl.load(part_ptr + (row * SPLIT + k) * 2, mask=k < used, other=-float("inf"))
    ds = tl.load(part_ptr + (row * SPLIT + k) * 2 + 1, mask=k < used, other=0.0)
    m = tl.max(ms, axis=0)
    d = tl.sum(tl.where(ms > -float("inf"), ds * tl.exp(ms - m), 0.0), axis=0)
    base = row.to(tl.int64) * n_cols
    start = s * chunk
    _forge_softmax_write(x_ptr + base, y_ptr + base, start, tl.minimum(start + chunk, n_cols), m, 1.0 / d, BLOCK)


def forge_softmax(x, dim, _max_block=None, _split=None, _chunk=None):
    """softmax(x, dim) with Triton when dim is the last dim of a contiguous fp32/fp16/bf16 tensor."""
    if x.dim() == 0 or dim not in (-1, x.dim() - 1) or not _forge_ok(x):
        return _forge_fallback(torch.softmax, x, dim)
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    if block <= (_max_block or FORGE_SOFTMAX_MAX_BLOCK):
        rows = max(1, min(triton.next_power_of_2(n_rows), 2048 // block))
        _forge_softmax_rows_kernel[(triton.cdiv(n_rows, rows),)](
            x, y, n_rows, n_cols, ROWS=rows, BLOCK=block, num_warps=_forge_warps(rows * block)
        )
        return y
    chunk = _chunk or FORGE_SOFTMAX_CHUNK
    split = _split
    if split is None:  # few long rows: split each row across programs to fill the GPU
        sms = _forge_sm_count(x.device)
        split = 1 if n_rows >= 2 * sms else min(triton.cdiv(4 * sms, n_rows), triton.cdiv(n_cols, chunk), 64)
    part = triton.cdiv(triton.cdiv(n_cols, max(split, 1)), chunk) * chunk
    used = triton.cdiv(n_cols, part)
    if used <= 1:
        _forge_softmax_online_kernel[(n_rows,)](x, y, n_cols, BLOCK=chunk, num_warps=_forge_warps(chunk))
        return y
    split_p2 = triton.next_power_of_2(used)
    parts = torch.empty((n_rows, split_p2, 2), device=x.device, dtype=torch.float32)
    _forge_softmax_partial_kernel[(n_rows, used)](
        x, parts, n_cols, part, SPLIT=split_p2, BLOCK=chunk, num_warps=_forge_warps(chunk)
    )
    _forge_softmax_split_apply_kernel[(n_rows, used)](
        x, y, parts, n_cols, part, used, SPLIT=split_p2, BLOCK=chunk, num_warps=_forge_warps(chunk)
    )
    return y
