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
