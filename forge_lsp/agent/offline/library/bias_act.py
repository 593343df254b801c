# ---- forge offline library: bias add + activation epilogue ----------------------------------
import torch
import triton
import triton.language as tl

# forge:dev-only-begin
from forge_lsp.agent.offline.library.common import _forge_fallback, _forge_ok

# forge:dev-only-end

_FORGE_ACTS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}


@triton.jit
def _forge_activation(y, ACT: tl.constexpr):
    if ACT == 1:  # relu (NaN stays NaN, as in torch)
        y = tl.where(y < 0.0, 0.0, y)
    elif ACT == 2:  # exact gelu
        y = 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))
    elif ACT == 3:  # tanh gelu; tanh(z) = 1 - 2 / (1 + exp(2z)) saturates cleanly at +-1
        z = 0.7978845608028654 * (y + 0.044715 * y * y * y)
        y = 0.5 * y * (2.0 - 2.0 / (1.0 + tl.exp(2.0 * z)))
    elif ACT == 4:  # silu
        y = y / (1.0 + tl.exp(-y))
    return y


@triton.jit
def _forge_bias_act_kernel(
    x_ptr,
    b_ptr,
    y_ptr,
    n_rows,
    n_cols,
    n_bias,
    BIAS: tl.constexpr,
    ACT: tl.constexpr,
    BR: tl.constexpr,
    BL: tl.constexpr,
):
    # x viewed as [n_rows, n_cols]; BIAS 1: bias[col] (last-dim bias), 2: bias[row % n_bias]
    # (channel bias such as (C, 1, 1) on NCHW), 0: none. One read, one write, fp32 math.
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.program_id(1) * BL + tl.arange(0, BL)
    rmask = rows < n_rows
    cmask = cols < n_cols
    mask = rmask[:, None] & cmask[None, :]
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if BIAS == 1:
        x = x + tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
    elif BIAS == 2:
        x = x + tl.load(b_ptr + rows % n_bias, mask=rmask, other=0.0).to(tl.float32)[:, None]
    tl.store(y_ptr + offs, _forge_activation(x, ACT).to(y_ptr.dtype.element_ty), mask=mask)


def _forge_act_torch(y, act):
    if act == "relu":
        return torch.relu(y)
    if act == "gelu":
        return torch.nn.functional.gelu(y)
    if act == "gelu_tanh":
        return torch.nn.functional.gelu(y, approximate="tanh")
    if act == "silu":
        return torch.nn.functional.silu(y)
    return y


def _forge_bias_act_torch(x, bias, act):
    return _forge_act_torch(x + bias, act)


def _forge_linear_act_torch(x, weight, bias, act):
    return _forge_act_torch(torch.nn.functional.linear(x, weight, bias), act)


def _forge_launch_bias_act(x, bias, y, n_rows, n_cols, mode, n_bias, act):
    bl = min(triton.next_power_of_2(n_cols), 1024)
    br = max(1, min(triton.next_power_of_2(n_rows), 4096 // bl))
    grid = (triton.cdiv(n_rows, br), triton.cdiv(n_cols, bl))
    _forge_bias_act_kernel[grid](
        x,
        bias if bias is not None else x,
        y,
        n_rows,
        n_cols,
        n_bias,
        BIAS=mode,
        ACT=_FORGE_ACTS[act],
        BR=br,
        BL=bl,
        num_warps=4,
    )


def _forge_bias_layout(shape, bias_shape):
    """(mode, n_rows, n_cols, n_bias) when the bias has exactly one non-1 dim k that broadcasts
    over x without growing it (right-aligned, bias.shape[k] == x.shape[k]); else None."""
    if len(bias_shape) > len(shape):
        return None
    padded = (1,) * (len(shape) - len(bias_shape)) + tuple(bias_shape)
    dims = [i for i, s in enumerate(padded) if s != 1]
    if len(dims) != 1 or padded[dims[0]] != shape[dims[0]]:
        return None
    k = dims[0]
    numel = 1
    for s in shape:
        numel *= s
    inner = 1
    for s in shape[k + 1 :]:
        inner *= s
    if k == len(shape) - 1:
        return 1, numel // shape[-1], shape[-1], shape[-1]
    return 2, numel // inner, inner, shape[k]


def forge_bias_act(x, bias, act):
    """act(x + bias) in one pass, for a bias broadcast along one dim (last-dim or (C, 1, ..., 1))."""
    layout = _forge_bias_layout(tuple(x.shape), tuple(bias.shape)) if act in _FORGE_ACTS else None
    if layout is None or triton.cdiv(layout[2], 1024) > 65535 or not _forge_ok(x, bias):  # grid dim 1 limit
        return _forge_fallback(_forge_bias_act_torch, x, bias, act)
    mode, n_rows, n_cols, n_bias = layout
    y = torch.empty_like(x)
    _forge_launch_bias_act(x, bias, y, n_rows, n_cols, mode, n_bias, act)
    return y


def forge_linear_act(x, weight, bias, act):
    """act(x @ weight.T + bias): a bias-free matmul (cuBLAS), then one fused bias+activation
    epilogue kernel written in place over the fresh matmul output."""
    if (
        act not in _FORGE_ACTS
        or x.dim() < 1
        or weight.dim() != 2
        or x.shape[-1] != weight.shape[1]
        or (bias is not None and tuple(bias.shape) != (weight.shape[0],))
        or not _forge_ok(*([bias] if bias is not None else []), strided=(x, weight))
    ):
        return _forge_fallback(_forge_linear_act_torch, x, weight, bias, act)
    y = torch.matmul(x, weight.t())
    if not y.is_contiguous() or y.numel() == 0:
        return _forge_act_torch(y + bias if bias is not None else y, act)  # matmul done: finish in torch
    n_cols = weight.shape[0]
    _forge_launch_bias_act(y, bias, y, y.numel() // n_cols, n_cols, 1 if bias is not None else 0, n_cols, act)
    return y
