"""Task files are read from their AST, with clear errors."""

import pytest
from conftest import FIXTURES

from forge_lsp.engine import TaskError, load_task


def test_loads_kernelbench_task_with_forge_settings():
    task = load_task(FIXTURES / "softmax_small.py")
    assert task.model_class == "Model"
    assert task.vary == {"batch_size": [7]}
    assert task.tolerance_for("torch.float32").atol == 1e-4
    assert task.tolerance_for("bfloat16").atol == 1e-2


def test_overrides_and_sha_changes_with_settings():
    a = load_task(FIXTURES / "softmax_small.py")
    b = load_task(FIXTURES / "softmax_small.py", vary={"batch_size": [3, 5]}, trials=5)
    assert b.vary == {"batch_size": [3, 5]} and b.trials == 5
    assert a.sha != b.sha


@pytest.mark.parametrize(
    "body, message",
    [
        ("import torch\n", "no class 'Model'"),
        ("class Model:\n    pass\ndef get_inputs():\n    return []\n", "get_init_inputs"),
        ("class Model(:\n", "syntax error"),
        (
            "n = 3\nclass Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\nFORGE = {'vary': {'m': [2]}}\n",
            "not a module-level constant",
        ),
    ],
)
def test_bad_task_files_give_clear_errors(tmp_path, body, message):
    p = tmp_path / "task.py"
    p.write_text(body)
    with pytest.raises(TaskError, match=message):
        load_task(p)


def test_captured_input_set_must_exist(tmp_path):
    p = tmp_path / "task.py"
    p.write_text(
        "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
        "FORGE = {'input_sets': ['missing.pt']}\n"
    )
    with pytest.raises(TaskError, match="does not exist"):
        load_task(p)


TASK_HEAD = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, *xs):\n        return xs[0]\n\n"
TASK_TAIL = "\ndef get_init_inputs():\n    return []\n"


@pytest.mark.parametrize(
    ("body", "kinds"),
    [
        ("n = 8\n\ndef get_inputs():\n    return [torch.randn(n, 4) * 3, torch.rand(n) - 0.5]\n", ["normal", "iid"]),
        (
            "def get_inputs():\n    x = torch.randn(4, 4).cuda()\n    return [x, 3, torch.randint(0, 9, (4,))]\n",
            ["normal", "value", "iid"],
        ),
        (
            "def get_inputs():\n    return [torch.empty(4).normal_(), torch.abs(torch.randn(4)), 1 / torch.rand(4)]\n",
            ["normal", "iid", "structured"],
        ),
        # structure the task ties together: only new draws keep it
        (
            "N = 8\n\ndef get_inputs():\n    A = torch.triu(torch.randn(N, N))\n    return [A, torch.randn(N, N)]\n",
            ["structured", "normal"],
        ),
        ("def get_inputs():\n    p = torch.softmax(torch.randn(4, 8), -1)\n    return [p]\n", ["structured"]),
        (
            "def get_inputs():\n    ids = torch.sort(torch.randint(0, 5, (9,))).values\n    return [ids, torch.randn(9)]\n",
            ["structured", "normal"],
        ),
        # one input drawn from another: both are tied
        (
            "def get_inputs():\n    x = torch.randn(4)\n    y = x + 0.1 * torch.randn(4)\n    return [x, y]\n",
            ["structured", "structured"],
        ),
        (
            "def get_inputs():\n    x = torch.randn(4)\n    for _ in range(2):\n        x = x * 2\n    return [x]\n",
            ["structured"],
        ),
        ("def get_inputs():\n    xs = [torch.randn(4)]\n    return xs\n", None),
    ],
)
def test_input_kinds_say_which_inputs_a_permutation_keeps_in_the_tasks_distribution(tmp_path, body, kinds):
    path = tmp_path / "task.py"
    path.write_text(TASK_HEAD + body + TASK_TAIL)
    assert load_task(path).input_kinds == kinds
