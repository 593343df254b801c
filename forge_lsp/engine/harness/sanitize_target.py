"""In the sanitized child process: build the task's and the candidate's models and call the candidate once
on the smallest input set the task verifies (`forge_lsp.engine.sanitize` runs this under compute-sanitizer)."""

from __future__ import annotations

import sys

import torch

from ..sanitize import SanitizeRequest
from .loading import cached_load_inline, call_model, exec_module


def main(request_file: str) -> int:
    """In the sanitized child: build the task's and the candidate's models and call the candidate once on the
    smallest input set the task verifies."""
    request = SanitizeRequest.read(request_file)
    task, cand = request.task, request.candidate
    device = torch.device("cuda", torch.cuda.current_device())
    mod = exec_module(task.source, task.name, "task")
    sizes: list[dict[str, int]] = [{}] + [{name: v} for name, values in task.vary.items() for v in values]

    def draw(overrides: dict[str, int]) -> tuple[list[object], list[object]]:
        saved = {k: getattr(mod, k) for k in overrides}
        try:
            for k, v in overrides.items():
                setattr(mod, k, v)
            torch.manual_seed(task.seed)
            init = list(getattr(mod, task.init_inputs_fn)())
            torch.manual_seed(task.seed)
            inputs = list(getattr(mod, task.inputs_fn)())
        finally:
            for k, v in saved.items():
                setattr(mod, k, v)
        return inputs, init

    drawn = [draw(o) for o in sizes]
    inputs, init = min(drawn, key=lambda d: sum(x.numel() for x in d[0] if isinstance(x, torch.Tensor)))
    with cached_load_inline():
        cand_mod = exec_module(cand.source, cand.name, "candidate")
    torch.manual_seed(task.seed)
    model = getattr(cand_mod, cand.class_name)(*init).to(device)
    try:
        torch.manual_seed(task.seed)
        model.load_state_dict(getattr(mod, task.model_class)(*init).state_dict(), strict=True)
    except Exception:  # noqa: BLE001 - same-seed construction, as verification falls back to
        pass
    call_model(model, [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs])
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
