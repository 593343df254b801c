# ---- forge offline library: group norm (N, C, *) ------------------------------------------
import torch

# forge:dev-only-begin
from forge_lsp.agent.offline.library.common import _forge_fallback, _forge_ok
from forge_lsp.agent.offline.library.seg_norm import _forge_seg_norm

# forge:dev-only-end


def forge_group_norm(x, num_groups, weight=None, bias=None, eps=1e-5, _split=None, _block=None):
    """F.group_norm with Triton for contiguous (N, C, *) inputs; C divisible by num_groups.

    A group of one sample is contiguous in this layout: one segment of C / G channels x spatial.
    """
    params = [p for p in (weight, bias) if p is not None]
    if (
        x.dim() < 2
        or num_groups <= 0
        or x.shape[1] % num_groups != 0
        or not _forge_ok(x, *params)
        or any(tuple(p.shape) != (x.shape[1],) for p in params)
    ):
        return _forge_fallback(torch.nn.functional.group_norm, x, num_groups, weight, bias, eps)
    n, c = x.shape[0], x.shape[1]
    hw = x.numel() // (n * c)
    cpg = c // num_groups
    return _forge_seg_norm(
        x, n * num_groups, cpg * hw, hw, cpg, num_groups, weight, bias, eps, False, split=_split, block=_block
    )
