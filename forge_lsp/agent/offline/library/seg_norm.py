# ---- forge offline library: normalization over contiguous segments --------------------------
# Shared by group norm (a segment = one (n, group): channels x spatial, per-channel affine) and
# by layer/RMS norm rows too long for registers (a segment = one row, per-element affine:
# HW = 1, cpg = row length). One Welford pass for the statistics, one normalize pass; when
# there are too few segments to fill the GPU, each is split across programs and the partial
# (count, mean, M2) states are merged with Chan's formula.
import torch
import triton
import triton.language as tl

# forge:dev-only-begin
from forge_lsp.agent.offline.library.common import _forge_sm_count, _forge_welford

# forge:dev-only-end


@triton.jit
def _forge_seg_apply(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    base,
    start,
    stop,
    g,
    HW,
    cpg,
    mean,
    rstd,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    PER_CHANNEL: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # y = (x - mean) * rstd * w[c] + b[c] over segment elements [start, stop), c = g * cpg + i // HW.
    offs = tl.arange(0, BLOCK)
    if PER_CHANNEL:  # large planes: walk channel by channel, scale and shift are scalars
        for c_in in range(start // HW, tl.cdiv(stop, HW)):
            a = rstd
            s = 0.0
            if HAS_W:
                a = rstd * tl.load(w_ptr + g * cpg + c_in).to(tl.float32)
            if HAS_B:
                s = tl.load(b_ptr + g * cpg + c_in).to(tl.float32)
            lo = tl.maximum(c_in * HW, start)
            hi = tl.minimum(c_in * HW + HW, stop)
            for i0 in range(lo, hi, BLOCK):
                i = i0 + offs
                mask = i < hi
                x = tl.load(x_ptr + base + i, mask=mask, other=0.0).to(tl.float32)
                tl.store(y_ptr + base + i, ((x - mean) * a + s).to(y_ptr.dtype.element_ty), mask=mask)
    else:  # small planes (or per-element affine): flat walk, gathers of w/b hit L1
        for i0 in range(start, stop, BLOCK):
            i = i0 + offs
            mask = i < stop
            x = tl.load(x_ptr + base + i, mask=mask, other=0.0).to(tl.float32)
            y = (x - mean) * rstd
            c = g * cpg + i // HW
            if HAS_W:
                y = y * tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
            if HAS_B:
                y = y + tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + base + i, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _forge_seg_stats(mean, m2, n, eps, RMS: tl.constexpr):
    # (center, rstd): layer/group norm center on the mean; RMS norm uses mean(x^2) = M2/n + mean^2
    if RMS:
        center = mean * 0.0
        rstd = tl.math.rsqrt(m2 / n + mean * mean + eps)
    else:
        center = mean
        rstd = tl.math.rsqrt(m2 / n + eps)
    return center, rstd


@triton.jit
def _forge_seg_fused_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    HW,
    cpg,
    num_groups,
    seg_size,
    eps,
    RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    PER_CHANNEL: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # One program per segment: Welford pass, then normalize.
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * seg_size
    mean, m2 = _forge_welford(x_ptr + base, seg_size, BLOCK)
    center, rstd = _forge_seg_stats(mean, m2, seg_size, eps, RMS)
    _forge_seg_apply(
        x_ptr,
        w_ptr,
        b_ptr,
        y_ptr,
        base,
        0,
        seg_size,
        pid % num_groups,
        HW,
        cpg,
        center,
        rstd,
        HAS_W,
        HAS_B,
        PER_CHANNEL,
        BLOCK,
    )


@triton.jit
def _forge_seg_partial_kernel(x_ptr, part_ptr, seg_size, chunk, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # Program (segment, s) writes (count, mean, M2) of its slice of the segment.
    pid = tl.program_id(0)
    s = tl.program_id(1)
    start = s * chunk
    n = tl.minimum(seg_size - start, chunk)
    mean, m2 = _forge_welford(x_ptr + pid.to(tl.int64) * seg_size + start, n, BLOCK)
    out = part_ptr + (pid * SPLIT + s) * 3
    tl.store(out, n.to(tl.float32))
    tl.store(out + 1, mean)
    tl.store(out + 2, m2)


@triton.jit
def _forge_seg_split_apply_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    part_ptr,
    HW,
    cpg,
    num_groups,
    seg_size,
    chunk,
    used,
    eps,
    RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    PER_CHANNEL: tl.constexpr,
    SPLIT: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # Merge the segment's SPLIT partial states (Chan), then normalize this program's slice.
    pid = tl.program_id(0)
    s = tl.program_id(1)
    k = tl.arange(0, SPLIT)
    parts = part_ptr + (pid * SPLIT + k) * 3
    cnt = tl.load(parts, mask=k < used, other=0.0)  # slots past `used` count nothing
    means = tl.load(parts + 1, mask=k < used, other=0.0)
    m2s = tl.load(parts + 2, mask=k < used, other=0.0)
    mean = tl.sum(cnt * means, axis=0) / seg_size
    d = means - mean
    m2 = tl.sum(m2s + cnt * d * d, axis=0)
    center, rstd = _forge_seg_stats(mean, m2, seg_size, eps, RMS)
    start = s * chunk
    _forge_seg_apply(
        x_ptr,
        w_ptr,
        b_ptr,
        y_ptr,
        pid.to(tl.int64) * seg_size,
        start,
        tl.minimum(start + chunk, seg_size),
        pid % num_groups,
        HW,
        cpg,
        center,
        rstd,
        HAS_W,
        HAS_B,
        PER_CHANNEL,
        BLOCK,
    )


def _forge_seg_norm(x, segments, seg_size, hw, cpg, num_groups, weight, bias, eps, rms, split=None, block=None):
    """Normalize `segments` contiguous segments of `seg_size` elements of contiguous `x`."""
    y = torch.empty_like(x)
    block = block or min(4096, triton.next_power_of_2(seg_size))
    warps = 4 if block <= 1024 else 8
    per_channel = hw >= block // 2
    w = weight if weight is not None else x
    b = bias if bias is not None else x
    if split is None:
        # enough segments to fill the GPU: one program each; else split each segment
        target = 4 * _forge_sm_count(x.device)
        split = 1 if segments >= target else min(triton.cdiv(target, segments), triton.cdiv(seg_size, block), 64)
    if split <= 1:
        _forge_seg_fused_kernel[(segments,)](
            x,
            w,
            b,
            y,
            hw,
            cpg,
            num_groups,
            seg_size,
            eps,
            RMS=rms,
            HAS_W=weight is not None,
            HAS_B=bias is not None,
            PER_CHANNEL=per_channel,
            BLOCK=block,
            num_warps=warps,
        )
        return y
    chunk = triton.cdiv(triton.cdiv(seg_size, split), block) * block  # slices start on BLOCK boundaries
    used = triton.cdiv(seg_size, chunk)
    if used == 1:
        return _forge_seg_norm(x, segments, seg_size, hw, cpg, num_groups, weight, bias, eps, rms, 1, block)
    split_p2 = triton.next_power_of_2(used)
    parts = torch.empty((segments, split_p2, 3), device=x.device, dtype=torch.float32)
    _forge_seg_partial_kernel[(segments, used)](x, parts, seg_size, chunk, SPLIT=split_p2, BLOCK=block, num_warps=warps)
    _forge_seg_split_apply_kernel[(segments, used)](
        x,
        w,
        b,
        y,
        parts,
        hw,
        cpg,
        num_groups,
        seg_size,
        chunk,
        used,
        eps,
        RMS=rms,
        HAS_W=weight is not None,
        HAS_B=bias is not None,
        PER_CHANNEL=per_channel,
        SPLIT=split_p2,
        BLOCK=block,
        num_warps=warps,
    )
    return y
