import torch
import torch.nn as nn

BLOCK = 64


class ModelNew(nn.Module):
    """Blockwise upper-triangular matmul: output block (I, J) exists only for I <= J, and its reduction runs
    over blocks I..J alone, since A is zero left of its diagonal and B below it. Right for triangular inputs
    only: a nonzero below either diagonal is never read."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        n = A.shape[-1]
        C = A.new_zeros(n, n)
        for i in range(0, n, BLOCK):
            ie = min(i + BLOCK, n)
            for j in range(i, n, BLOCK):
                je = min(j + BLOCK, n)
                C[i:ie, j:je] = A[i:ie, i:je] @ B[i:je, j:je]
            C[i:ie, i:ie] = torch.triu(C[i:ie, i:ie])
        return C
