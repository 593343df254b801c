"""Architecture invariants that a test can hold."""

import subprocess
import sys


def test_engine_front_door_imports_neither_torch_nor_editor_libraries():
    code = ("import sys, forge_lsp.engine, forge_lsp.cli.eval_cmd; "
            "bad = [m for m in ('torch', 'pygls', 'lsprotocol', 'triton') if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
