"""A large elementwise task: 4 GiB in, 4 GiB out (fp32), drawn on the host. forge must judge it in bounded memory of
its own: input sets drawn one at a time, outputs compared in chunks."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


FORGE = {"trials": 2, "vary": {"rows": [8193]}}

rows = 8192
cols = 131072


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
