"""Put verified candidates in place of hot module instances inside a running model (child side: imports torch).

A patch names a module class's instances (by their qualified names in the model, as the hot-spot report
gives them), a candidate's source (a task extracted from those instances, with ``ModelNew``) and the captured
call (`CallArg`s). Each instance gets its own ``ModelNew()``, loaded with the instance's ``state_dict`` and in
the instance's device, dtype and mode; the instance's ``forward`` is shadowed by one that sends a call shaped
like the captured one (the same arguments, tensors where tensors were, the same constants) and inside the
domain the candidate was verified on (the patch's ``domain``: its tensors' dtypes, ranks and verified sizes,
contiguous unless verified on any layout, and for a candidate right on the default stream only, a call on that
stream outside CUDA-graph capture) to the candidate, and any other call to the original; a patch without a
domain (written before patches had one) is matched by shape alone. The model's own modules, parameters and
``state_dict`` are unchanged; `uninstall` restores the instances.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from .report import CallArg


class PatchError(RuntimeError):
    pass


def load_candidate(path: str | Path) -> Any:
    """The candidate file as a module of its own (a real file: torch.compile reads sources)."""
    path = Path(path)
    name = f"forge_patch_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PatchError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "ModelNew"):
        raise PatchError(f"{path.name} defines no ModelNew")
    return module


def instances_by_name(model: Any) -> dict[str, Any]:
    """The model's modules by the names the hot-spot report uses (the root's class name, then the path)."""
    root = type(model).__name__
    return {(f"{root}.{name}" if name else root): m for name, m in model.named_modules()}


def install(model: Any, patches: list[dict[str, Any]]) -> list[str]:
    """Apply `patches` (dicts: ``instances``, ``source_file``, ``call``, ``output``, and ``domain``, the
    `VerifiedDomain` JSON the candidate was verified on, where the patch has one) to `model`; returns the names of
    the instances replaced. Raises `PatchError` for a patch that cannot apply (a missing instance, a candidate
    whose state does not load)."""
    torch = _torch()
    named = instances_by_name(model)
    done: list[str] = []
    for patch in patches:
        spec = patch.get("output_spec") or ("tensor" if patch.get("output", "tensor") == "tensor" else None)
        if spec is None:
            raise PatchError(f"{patch.get('cls')}: its calls return a {patch['output']}, which cannot be rebuilt")
        module = load_candidate(patch["source_file"])
        call = [CallArg.model_validate(a) for a in patch["call"]]
        for name in patch["instances"]:
            inst = named.get(name)
            if inst is None:
                raise PatchError(f"the model has no module {name}")
            new = module.ModelNew()
            try:
                # the instance's own parameter and buffer objects, not copies: weights loaded or trained into the
                # model after `apply` are the ones the candidate computes with
                new.load_state_dict(inst.state_dict(keep_vars=True), strict=True, assign=True)
            except RuntimeError as exc:
                raise PatchError(f"{name}: its state does not load into the candidate: {exc}") from None
            ref = next(iter(inst.parameters()), None)
            ref = ref if ref is not None else next(iter(inst.buffers()), None)
            if ref is not None:
                new = new.to(device=ref.device, dtype=ref.dtype if ref.is_floating_point() else None)
            new.train(inst.training)
            _shadow(torch, inst, new, call, spec, patch.get("domain"))
            done.append(name)
    return done


#: torch.compile modes of the whole forward
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
#: whole-model transforms beside them: the model's parameters and 4-D inputs in channels_last (convolutional
#: models), the forward replayed as a CUDA graph per input signature (launch-bound forwards), and each instance of
#: the hot block classes compiled on its own (a region per block, rather than the whole forward)
TRANSFORMS = ("channels_last", "cuda_graphs", "blocks")
#: a modifier of a compile (whole forward or blocks): inductor keeps eager's rounding to bf16/fp16 between the ops it
#: fuses (``emulate_precision_casts``), so a compiled low-precision model computes what eager computes, where a plain
#: compile's fused ops skip those roundings and can land far from eager's outputs (ResNet-50 in bf16)
EAGER_CASTS = "eager_casts"
#: the single modes; a mode may join several with "+" (e.g. "channels_last+default"), see `mode_error`
MODEL_MODES = COMPILE_MODES + TRANSFORMS + (EAGER_CASTS,)


def mode_error(mode: str) -> str | None:
    """Why `mode` is not a whole-model mode, or None: "+"-joined parts, each known and given once, at most one
    torch.compile mode, not both "blocks" and a whole-forward compile, no "cuda_graphs" with "reduce-overhead"
    (it records graphs itself)."""
    parts = mode.split("+")
    unknown = [p for p in parts if p not in MODEL_MODES]
    if unknown:
        return f"unknown mode {unknown[0]!r} (one of {', '.join(MODEL_MODES)}, or several joined with '+')"
    if len(set(parts)) != len(parts):
        return f"{mode!r} names a part twice"
    compiled = [p for p in parts if p in COMPILE_MODES]
    if len(compiled) > 1:
        return f"{mode!r} names two torch.compile modes"
    if compiled and "blocks" in parts:
        return f"{mode!r}: 'blocks' compiles regions, not with a whole-forward compile"
    if "cuda_graphs" in parts and "reduce-overhead" in parts:
        return f"{mode!r}: reduce-overhead records CUDA graphs itself"
    if EAGER_CASTS in parts and not compiled and "blocks" not in parts:
        return f"{mode!r}: {EAGER_CASTS} modifies a compile (a torch.compile mode, or blocks)"
    return None


def compiler(torch: Any, mode: str | None, parts: list[str]) -> Any:
    """``torch.compile`` in `mode` (None: the default), with eager's roundings kept when `parts` say so: torch.compile
    takes a mode or options, not both, so the mode's own options are joined to ``emulate_precision_casts``."""
    if EAGER_CASTS not in parts:
        return lambda fn: torch.compile(fn, mode=mode)
    from torch._inductor import list_mode_options

    options = {**list_mode_options(mode or "default"), "emulate_precision_casts": True}
    return lambda fn: torch.compile(fn, options=options)


def compile_model(model: Any, mode: str, blocks: list[str] | tuple[str, ...] = ()) -> None:
    """The model's own forward (with whatever replacements are in place) transformed by `mode`, in place: the
    model object, its modules, its parameters' identities and its ``state_dict`` stay the same;
    `uncompile_model` undoes it. A torch.compile mode compiles the forward. "channels_last" puts the parameters in
    channels_last and each 4-D tensor argument too (the conversion is part of every call). "cuda_graphs" replays
    the forward as a CUDA graph recorded per input signature (`_GraphedForward`). "blocks" compiles each instance
    of the classes `blocks` names (``module.QualName`` keys) on its own. "eager_casts" makes a compile keep eager's
    low-precision roundings (`compiler`). With "reduce-overhead" or "cuda_graphs"
    each call's outputs are copied out, since the next replay reuses the graph's output memory. Raises
    `PatchError` for a mode that does not apply to this model (no convolution, not on a GPU, no such block)."""
    torch = _torch()
    why = mode_error(mode)
    if why is not None:
        raise PatchError(why)
    parts = mode.split("+")
    device = next((p.device for p in model.parameters()), None)
    if "cuda_graphs" in parts and (device is None or device.type != "cuda"):
        raise PatchError("cuda_graphs: the model is not on a CUDA device")
    if "channels_last" in parts and not any(isinstance(m, torch.nn.Conv2d) for m in model.modules()):
        raise PatchError("channels_last: the model has no 2-D convolution")
    compiled_blocks = []
    if "blocks" in parts:
        named = instances_by_name(model)
        compiled_blocks = [named[n] for n in blocks if n in named and named[n] is not model]
        if not compiled_blocks:
            raise PatchError("blocks: the model has none of the hot blocks' instances")
    if "channels_last" in parts:
        model.to(memory_format=torch.channels_last)
    for m in compiled_blocks:
        m.__dict__["forward"] = compiler(torch, None, parts)(type(m).forward.__get__(m))
    forward = type(model).forward.__get__(model)
    compile_mode = next((p for p in parts if p in COMPILE_MODES), None)
    if compile_mode is not None:
        forward = compiler(torch, compile_mode, parts)(forward)
    if compile_mode == "reduce-overhead":
        inner = forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            torch.compiler.cudagraph_mark_step_begin()
            return torch.utils._pytree.tree_map_only(torch.Tensor, torch.clone, inner(*args, **kwargs))

    if "cuda_graphs" in parts:
        forward = model.__dict__["_forge_graphed"] = _GraphedForward(torch, forward)
    if "channels_last" in parts:
        inner_cl = forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            def cl(x: Any) -> Any:
                return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x

            args, kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, cl, (args, kwargs))
            return inner_cl(*args, **kwargs)

    model.__dict__["_forge_compiled_mode"] = mode
    model.__dict__["_forge_compiled_blocks"] = compiled_blocks
    model.__dict__["forward"] = forward


def uncompile_model(model: Any) -> None:
    mode = model.__dict__.pop("_forge_compiled_mode", None)
    if mode is None:
        return
    model.__dict__.pop("forward", None)
    model.__dict__.pop("_forge_graphed", None)
    for m in model.__dict__.pop("_forge_compiled_blocks", []):
        m.__dict__.pop("forward", None)
    if "channels_last" in mode.split("+"):
        model.to(memory_format=_torch().contiguous_format)


class _GraphedForward:
    """A forward replayed as a CUDA graph, one recorded per input signature (each tensor's shape, dtype, device and
    strides, every other argument's value), at most `MAX` of them; a call in another signature past that, with
    autograd recording, or whose recording failed runs the forward as it is (`failures` says why). Inputs are
    copied into the graph's own buffers, outputs copied out of them."""

    MAX = 8

    def __init__(self, torch: Any, forward: Any) -> None:
        self.torch, self.forward = torch, forward
        self.graphs: dict[Any, Any] = {}  # signature -> (graph, static inputs, static outputs), or None: eager
        self.failures: list[str] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        torch = self.torch
        flat, spec = torch.utils._pytree.tree_flatten((args, kwargs))
        if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in flat):
            return self.forward(*args, **kwargs)
        key = (
            str(spec),
            tuple(
                (tuple(x.shape), x.dtype, str(x.device), x.stride()) if isinstance(x, torch.Tensor) else repr(x)
                for x in flat
            ),
        )
        if key not in self.graphs:
            self.graphs[key] = None
            if len(self.graphs) <= self.MAX:
                try:
                    self.graphs[key] = self._record(flat, spec)
                except Exception as exc:  # noqa: BLE001 - a forward that cannot be recorded runs as it is
                    self.failures.append(f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        entry = self.graphs[key]
        if entry is None:
            return self.forward(*args, **kwargs)
        graph, static_in, static_out = entry
        for buf, x in zip(static_in, flat, strict=True):
            if isinstance(x, torch.Tensor):
                buf.copy_(x)
        graph.replay()
        return torch.utils._pytree.tree_map_only(torch.Tensor, torch.clone, static_out)

    def _record(self, flat: list[Any], spec: Any) -> Any:
        torch = self.torch
        static_in = [x.clone() if isinstance(x, torch.Tensor) else x for x in flat]
        args, kwargs = torch.utils._pytree.tree_unflatten(static_in, spec)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(3):  # warm up off the default stream (lazy inits, autotuning) before recording
                self.forward(*args, **kwargs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            static_out = self.forward(*args, **kwargs)
        return graph, static_in, static_out


def uninstall(model: Any) -> None:
    for m in model.modules():
        if "_forge_candidate" in m.__dict__:
            del m.__dict__["_forge_candidate"]
            m.__dict__.pop("_forge_calls", None)
            m.__dict__.pop("_forge_shadow", None)
            m.__dict__.pop("forward", None)


def route(model: Any, replaced: bool) -> None:
    """Send the installed replacements' calls to their candidates (`replaced`) or every call to the original
    forward, keeping the candidates as they are: what a compiled one compiled, it keeps. Timing a model with and
    without its replacements switches them so; installing them again for each forward would time a new candidate's
    first call each time (a fresh torch.compile wrapper's setup: about 1 ms an instance on the CPU)."""
    for m in model.modules():
        shadow = m.__dict__.get("_forge_shadow")
        if shadow is None:
            continue
        if replaced:
            m.__dict__["forward"] = shadow
        else:
            m.__dict__.pop("forward", None)


def rebuild(torch: Any, spec: Any, out: Any) -> Any:
    """The original output's structure (`child_observe.output_spec`) around the candidate's tensors, taken in order."""
    if spec == "tensor":
        return out
    tensors = iter([out] if isinstance(out, torch.Tensor) else list(out))

    def build(s: Any) -> Any:
        if s == "tensor":
            return next(tensors)
        if "const" in s:
            return s["const"]
        if "seq" in s:
            items = [build(i) for i in s["items"]]
            return tuple(items) if s["seq"] == "tuple" else items
        module, _, qual = s["map"].partition(":")
        values = {k: build(i) for k, i in zip(s["keys"], s["items"], strict=True)}
        if module == "builtins":
            return values
        cls: Any = importlib.import_module(module)
        for part in qual.split("."):
            cls = getattr(cls, part)
        return cls(**values)

    return build(spec)


def _shadow(
    torch: Any, inst: Any, new: Any, call: list[CallArg], spec: Any = "tensor", domain: dict[str, Any] | None = None
) -> None:
    """Shadow `inst.forward`: a call shaped like `call` whose tensors are inside `domain`, and that autograd does not
    record (the engine verifies without it), goes to `new`, any other to the original. Routes are counted in
    ``inst._forge_calls`` (eager calls: not those torch.compile traces). The argument names and the domain's checks
    are worked out here, once, so that a call costs a few attribute reads per tensor."""
    from .child_source import constant

    original = type(inst).forward.__get__(inst)
    n_pos = next((i for i, a in enumerate(call) if a.how != "pos"), len(call))
    kw_names = tuple(a.name for a in call[n_pos:])
    flags = tuple(a.tensor for a in call)
    constants = [(i, a.source) for i, a in enumerate(call) if not a.tensor]
    # a call's arguments are named as the hot-spot run named them (`child_observe.name_arguments`): the positional ones
    # by the forward's parameters, which a call cannot change; so a captured call whose positional names are not
    # those (or that passed a positional argument after a keyword one) is never matched
    matchable = all(a.how == "kw" for a in call[n_pos:]) and _positional_names(inst, n_pos) == [
        a.name for a in call[:n_pos]
    ]
    inside = _domain_check(torch, domain)
    calls = {"optimized": 0, "reference": 0}
    tensor_type = torch.Tensor
    # a call torch.compile traces is not counted: a count read while tracing becomes a guard on its value, so a
    # model compiled whole would be compiled again at every call, then run eagerly past dynamo's recompile limit
    tracing = torch.compiler.is_compiling
    grad_enabled = torch.is_grad_enabled
    params = tuple(new.parameters())  # the instance's own (`install` shares them)

    def as_verified(tensors: list[Any]) -> bool:
        """Not recorded by autograd (the engine verifies without it; kernels may have no backward), and the weights
        still dense (`model.to(memory_format=...)` since would leave them strided; verified on dense ones)."""
        if grad_enabled() and (any(t.requires_grad for t in tensors) or any(p.requires_grad for p in params)):
            return False
        return all(p.is_contiguous() for p in params)

    def forward(*args: Any, **kwargs: Any) -> Any:
        if matchable and len(args) == n_pos and tuple(kwargs) == kw_names:
            values = args + tuple(kwargs.values()) if kwargs else args
            if all(isinstance(v, tensor_type) is f for v, f in zip(values, flags, strict=True)):
                try:
                    same = all(constant(values[i], torch) == source for i, source in constants)
                except Exception:  # noqa: BLE001 - a constant forge cannot write: not the captured call
                    same = False
                tensors = [v for v, f in zip(values, flags, strict=True) if f]
                if same and (inside is None or inside(tensors)) and as_verified(tensors):
                    if not tracing():
                        calls["optimized"] += 1
                    got = rebuild(torch, spec, new(*tensors))
                    probe = inst.__dict__.get("_forge_probe")
                    if probe is not None and not probe:  # being checked: the original on the same call, once
                        probe.append((original(*args, **kwargs), got, args, kwargs))
                    return got
        if not tracing():
            calls["reference"] += 1
        return original(*args, **kwargs)

    inst.__dict__["_forge_candidate"] = new  # not a submodule: the model's state_dict stays as it was
    inst.__dict__["_forge_calls"] = calls
    inst.__dict__["_forge_shadow"] = forward  # `route` switches it off and on
    inst.__dict__["forward"] = forward


def _positional_names(inst: Any, n: int) -> list[str]:
    """The names `child_observe.name_arguments` gives the first `n` positional arguments of a call of `inst`."""
    import inspect

    try:
        params = list(inspect.signature(type(inst).forward).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    return [
        positional[i] if i < len(positional) else (f"{var}_{i - len(positional)}" if var is not None else f"arg{i}")
        for i in range(n)
    ]


def _domain_check(torch: Any, domain: dict[str, Any] | None) -> Any:
    """None for a patch without a domain (written before patches carried one: its calls are matched by shape
    alone); else a function of a call's tensors that says whether they are inside `domain` (`VerifiedDomain`'s
    JSON): each tensor's device type, dtype, rank and verified sizes, non-empty, contiguous unless the domain
    takes any layout, and, for a domain verified on the default stream only, a CUDA call on the device's
    default stream with no CUDA graph being captured."""
    if not domain:
        return None
    dtypes = tuple(t for t in (getattr(torch, d, None) for d in domain.get("dtypes") or ()) if t is not None)
    devices = frozenset(domain.get("device_types") or ())
    sizes = domain.get("sizes")
    ranks = tuple(domain.get("ranks") or ()) if sizes is None else tuple(len(arg) for arg in sizes)
    dims = (
        None
        if sizes is None
        else tuple(tuple((d, frozenset(s)) for d, s in enumerate(arg) if s is not None) for arg in sizes)
    )
    contiguous = bool(domain.get("contiguous", True))
    default_stream = bool(domain.get("default_stream", False))
    cuda_only, cpu_only = devices == {"cuda"}, devices == {"cpu"}  # t.is_cuda is cheaper than t.device.type
    cuda = torch.cuda
    defaults: dict[Any, Any] = {}  # each device's default stream, asked for once

    def inside(tensors: list[Any]) -> bool:
        if len(tensors) != len(ranks):
            return False
        for i, t in enumerate(tensors):
            if (
                t.dtype not in dtypes
                or t.dim() != ranks[i]
                or not (t.is_cuda if cuda_only else t.is_cpu if cpu_only else t.device.type in devices)
                or t.numel() == 0
                or (contiguous and not t.is_contiguous())
            ):
                return False
            if dims is not None:
                shape = t.shape
                for d, s in dims[i]:
                    if shape[d] not in s:
                        return False
        if default_stream and tensors and tensors[0].is_cuda:
            device = tensors[0].device
            default = defaults.get(device)
            if default is None:
                default = defaults[device] = cuda.default_stream(device)
            if cuda.current_stream(device) != default or cuda.is_current_stream_capturing():
                return False
        return True

    return inside


def _torch() -> Any:
    import torch

    return torch
