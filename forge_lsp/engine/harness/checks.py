"""Anti-cheat checks that run around candidate calls inside the worker."""

from __future__ import annotations

import gc
import os
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .compare import tensors_of


# ---------------------------------------------------------------- inputs and aliasing
def clone_inputs(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def written_in_place(inputs: list[Any]) -> None:
    """Bump each tensor's version counter, as an inplace op before the call would (no data touched): a model's
    inputs often come from one (an inplace ReLU, `x += ...`), the harness's fresh clones never do. Every other
    verified set reaches the candidate so, and a candidate that reads `_version` cannot tell use from verification."""
    from torch.autograd.graph import increment_version

    for x in inputs:
        if isinstance(x, torch.Tensor):
            try:
                increment_version(x)
            except RuntimeError:  # a tensor without a version counter (an inference tensor, in some torch releases)
                pass


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().contiguous().reshape(-1)
    return t.view(torch.uint8) if t.numel() else t


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-safe), for "inputs unchanged" and "repeatable" checks."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(_bits(a), _bits(b))


_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


_WEIGHTS: dict[tuple[str, torch.dtype], torch.Tensor] = {}


def _position_weights(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """`CHUNK` odd position weights of an integer type, drawn once per process, device and type from the OS's entropy
    with a generator of their own (the global RNG is left alone), so no candidate can know them ahead. Odd, so a
    weight times any nonzero difference is nonzero in the type's wrap-around arithmetic."""
    from .compare import CHUNK

    key = (str(device), dtype)
    if key not in _WEIGHTS:
        gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        high = 2**62 if dtype == torch.int64 else 2**31 - 1
        drawn = torch.randint(0, high, (CHUNK,), generator=gen, dtype=torch.int64).bitwise_or_(1)
        _WEIGHTS[key] = drawn.to(dtype).to(device)
    return _WEIGHTS[key]


def bits_digest(obj: Any) -> tuple[Any, ...]:
    """A fingerprint of the bits of every tensor in an output structure: shape, dtype and, for each bounded chunk, two
    sums of its bits read as integers in wrap-around arithmetic (32-bit, 64-bit for 8-byte types): one plain, one
    weighted by position with this process's random odd weights. One host sync. A change of one element always
    changes both; a change of several, but for a chance of about 2^-32. A copy of the same bits gives the same
    digest. Two passes over each chunk in its own width, with no widening copy for 4- and 8-byte types."""
    from .compare import _chunks

    parts: list[Any] = []
    sums: list[torch.Tensor] = []
    for t in tensors_of(obj):
        t = t.detach()
        parts.append((tuple(t.shape), str(t.dtype)))
        if t.numel() == 0:
            continue
        if t.is_complex():
            t = torch.view_as_real(t)
        width = t.element_size()
        bits = t.view(_INT_VIEW[width]) if t.dtype not in _INT_VIEW.values() and width in _INT_VIEW else t
        if bits.dtype == torch.bool:
            bits = bits.view(torch.uint8)
        acc = torch.int64 if width == 8 else torch.int32
        weights = _position_weights(t.device, acc)
        for _, chunk, _ in _chunks(bits, bits):
            values = chunk if chunk.dtype == acc else chunk.to(acc)
            plain, weighted = values.sum(dtype=acc), torch.mul(values, weights[: values.numel()]).sum(dtype=acc)
            sums += [plain.to(torch.int64), weighted.to(torch.int64)]
    if sums:
        parts.append(tuple(torch.stack(sums).tolist()))
    return tuple(parts)


def changed_inputs(before: list[Any], after: list[Any]) -> list[int]:
    return [
        i
        for i, (b, a) in enumerate(zip(before, after, strict=False))
        if isinstance(b, torch.Tensor) and not same_bits(b, a)
    ]


def _span(t: torch.Tensor) -> tuple[int, int] | None:
    storage = t.untyped_storage()
    if storage.nbytes() == 0:
        return None
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def aliased_outputs(outputs: Any, inputs: Iterable[Any]) -> list[str]:
    """Outputs whose memory overlaps an input's memory (returning an input or a view of it)."""
    spans = [s for x in inputs if isinstance(x, torch.Tensor) and (s := _span(x))]
    found = []
    for i, t in enumerate(tensors_of(outputs)):
        s = _span(t)
        if s and any(s[0] < e and b < s[1] for b, e in spans):
            found.append(f"output tensor {i}")
    return found


# ---------------------------------------------------------------- monkeypatching
_WATCHED_MODULES = (
    "torch",
    "torch.nn.functional",
    "torch.cuda",
    "torch.testing",
    "torch.nn.modules.module",
    "math",
    "time",
)


#: forge's own modules in a worker: the harness that judges (its functions, classes and values)
_FORGE = "forge_lsp."


class PatchGuard:
    """Snapshot of attributes a candidate could replace to fool the harness or the reference: torch's and the
    standard modules' functions, the task's, and all of forge's own modules, their classes, and their functions'
    code and defaults (a function whose ``__code__`` is swapped keeps its identity). `values`: the harness's own
    data (the tolerances), read as plain values, which must read the same after every call."""

    def __init__(self, extra: dict[str, Any] | None = None, values: Callable[[], Any] | None = None) -> None:
        """`extra`: more objects (modules, classes) whose attributes must stay put."""
        self._names = list(_WATCHED_MODULES)
        self._extra = dict(extra or {})
        self._values = values
        self._vsnap = values() if values is not None else None
        self._snap = self._take()
        # the live namespaces (module dicts, class mappingproxies) and forge's function objects, found once
        self._live = [(name, ns) for name, ns in self._objects(live=True)]
        self._funcs = [
            fn
            for name, ns in self._live
            if name.startswith((_FORGE, "__main__"))
            for v in list(ns.values())
            if isinstance(fn := v.__func__ if isinstance(v, staticmethod | classmethod) else v, types.FunctionType)
        ]
        self._fast = self._fast_take()
        #: forge's classes by name, and what each inherits: a name it inherits, set on the class itself, shadows the
        #: base's (a method replaced on a subclass leaves the base's namespace as it was)
        self._inherited = {
            name: {k for base in cls.__mro__[1:] for k in vars(base) if not k.startswith("__")}
            for name, cls in self._forge_modules()
            if isinstance(cls, type)
        }

    @staticmethod
    def _forge_modules():
        """(name, module) of forge's own modules loaded now, and of each (name, class) defined in one, in turn."""
        for name, mod in list(sys.modules.items()):
            spec = getattr(mod, "__spec__", None)  # the worker itself runs as __main__ (python -m)
            if mod is not None and (name.startswith(_FORGE) or str(getattr(spec, "name", "")).startswith(_FORGE)):
                yield name, mod
                for k, v in list(vars(mod).items()):
                    if isinstance(v, type) and getattr(v, "__module__", None) == name:
                        yield f"{name}.{k}", v

    def _fast_take(self) -> tuple:
        """Every watched namespace's keys and value identities, and forge's functions' code and defaults, as
        tuples made at C speed: compared whole after every call; `_take`'s named diff runs only when they
        differ."""
        spaces = tuple((tuple(ns), tuple(map(id, ns.values()))) for _, ns in self._live)
        funcs = tuple((id(f.__code__), id(f.__defaults__), id(f.__kwdefaults__)) for f in self._funcs)
        return spaces, funcs

    def _objects(self, live: bool = False):
        """(name, namespace) of everything watched; `live`: the namespaces themselves, not copies of classes'."""
        copy = (lambda ns: ns) if live else dict
        for name in self._names:
            mod = sys.modules.get(name)
            if mod is not None:
                yield name, vars(mod)
        yield "torch.Tensor", copy(vars(torch.Tensor))
        yield "torch.nn.Module", copy(vars(torch.nn.Module))
        yield "torch.cuda.Event", copy(vars(torch.cuda.Event))
        for name, obj in self._extra.items():
            yield name, copy(vars(obj))
        for name, obj in self._forge_modules():
            yield name, (copy(vars(obj)) if isinstance(obj, type) else vars(obj))

    def _take(self) -> dict[str, dict[str, int]]:
        snap = {}
        for name, ns in self._objects():
            own = name.startswith((_FORGE, "__main__"))  # forge's own (`_objects` yields __main__ only as forge)
            entry = {}
            for k, v in list(ns.items()):
                if k.startswith("__") or isinstance(v, types.ModuleType):
                    continue
                entry[k] = id(v)
                if own:
                    fn = v.__func__ if isinstance(v, staticmethod | classmethod) else v
                    if isinstance(fn, types.FunctionType):
                        entry[f"{k}.__code__"] = id(fn.__code__)
                        entry[f"{k}.__defaults__"] = id(fn.__defaults__)
                        entry[f"{k}.__kwdefaults__"] = id(fn.__kwdefaults__)
            snap[name] = entry
        return snap

    def changes(self) -> list[str]:
        values_same = self._values is None or self._values() == self._vsnap
        fast = self._fast_take()
        if values_same and fast == self._fast:
            return []
        now = self._take()
        changed = []
        for name, before in self._snap.items():
            after = now.get(name, {})
            for key, ident in before.items():
                if after.get(key) != ident and not (
                    "." in key and after.get(key.split(".", 1)[0]) != before.get(key.split(".", 1)[0])
                ):  # a function replaced: its own code and defaults are not named again
                    changed.append(f"{name}.{key}")
            inherited = self._inherited.get(name)
            if inherited:  # a name the class inherited, now set on the class: the base's shadowed
                changed += [f"{name}.{key}" for key in sorted(after.keys() - before.keys()) if key in inherited]
        if not values_same:
            changed.append("the harness's tolerances")
        if not changed:  # only what the named diff leaves out changed (a submodule imported since): the new baseline
            self._fast = fast
        return changed


# ---------------------------------------------------------------- outputs whose elements share memory
def _overlaps(t: torch.Tensor) -> bool:
    """Whether some elements of `t` share memory: a stride 0 on a dimension of more than one element, or strides that
    make distinct indices meet (torch's own test, where it can decide)."""
    if t.numel() < 2:
        return False
    if any(st == 0 and n > 1 for st, n in zip(t.stride(), t.shape, strict=True)):
        return True
    return torch._debug_has_internal_overlap(t) == 1


def overlapping_outputs(ref_out: Any, cand_out: Any) -> list[str]:
    """Output tensors (by position) whose elements share memory in the candidate's output but not in the
    reference's."""
    ref, cand = tensors_of(ref_out), tensors_of(cand_out)
    out = []
    for i, c in enumerate(cand):
        r = ref[i] if i < len(ref) else None
        if isinstance(c, torch.Tensor) and _overlaps(c) and not (isinstance(r, torch.Tensor) and _overlaps(r)):
            out.append(f"output {i} (shape {tuple(c.shape)}, strides {tuple(c.stride())})")
    return out


# ---------------------------------------------------------------- the reference model object
_MODULE_HOOKS = tuple(k for k in vars(torch.nn.Module()) if "hooks" in k)


def _module_structure(m: torch.nn.Module) -> tuple:
    d = vars(m)
    params = d.get("_parameters", {})
    return (
        id(type(m)),
        tuple(d),  # an instance `forward` or `__call__`, a new attribute
        tuple([len(d[k]) for k in _MODULE_HOOKS if k in d]),
        tuple(params),
        tuple(map(id, params.values())),
        tuple([t.data_ptr() for t in params.values() if t is not None]),
        tuple(map(id, d.get("_buffers", {}).values())),
        tuple(map(id, d.get("_modules", {}).values())),
    )


class ModuleWatch:
    """What a candidate could change about the reference model object in its own process: per submodule its class,
    its hooks (a hook on the instance, not process-wide), its own attributes (a `forward` set on the instance), its
    parameters', buffers' and submodules' identities and the parameters' storage — compared after every candidate call
    (`changes`) — and the parameters' values, compared at the end of each stage (`value_changes`: a weight zeroed or
    made subnormal through `.data` slows the reference without a new object or a version bump), at up to `SAMPLED`
    positions per parameter picked by the OS's randomness. The reference's own calls move the structure's baseline
    (`rebase`): what the model does to itself is its own."""

    SAMPLED = 256

    def __init__(self, model: torch.nn.Module) -> None:
        import secrets

        self.model = model
        self._modules = list(model.named_modules(remove_duplicate=False))
        self._structure = self._take()
        self._values = []
        with torch.no_grad():
            for p in model.parameters():
                flat = p.detach().reshape(-1)
                if flat.numel() == 0:
                    continue
                at = torch.tensor(
                    [secrets.randbelow(flat.numel()) for _ in range(min(self.SAMPLED, flat.numel()))],
                    device=flat.device,
                )
                self._values.append((p, at, flat[at].clone()))

    def _take(self) -> list[tuple[str, tuple]]:
        return [(name, _module_structure(m)) for name, m in self._modules]

    def rebase(self) -> None:
        self._structure = self._take()

    def changes(self) -> list[str]:
        now = self._take()
        if now == self._structure:
            return []
        what = (
            "its class",
            "its attributes",
            "its hooks",
            "its parameters",
            "its parameters",
            "its parameters' storage",
            "its buffers",
            "its submodules",
        )
        changed = []
        for (name, old), (_, parts) in zip(self._structure, now, strict=True):
            label = f"reference model{'.' + name if name else ''}"
            changed += [f"{label}: {w}" for w, a, b in zip(what, old, parts, strict=True) if a != b]
        return list(dict.fromkeys(changed))

    def value_changes(self) -> list[str]:
        with torch.no_grad():
            for p, at, before in self._values:
                if not same_bits(p.detach().reshape(-1)[at], before):
                    return ["reference model: its parameters' values"]
        return []


# ---------------------------------------------------------------- the process, for the next candidate
_SIGNALS = ("SIGINT", "SIGTERM", "SIGALRM", "SIGCHLD", "SIGCONT", "SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGSEGV", "SIGABRT")


def _children() -> tuple[int, ...]:
    """This process's live child processes (Linux), or () where that cannot be read."""
    import os

    found: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                found += [int(p) for p in f.read().split()]
    except OSError:
        return ()
    return tuple(sorted(found))


#: variables that, added, change how later candidates are built or run (a library's own cache paths do not)
_ENV_WATCHED = frozenset(
    "CC CXX NVCC CFLAGS CXXFLAGS NVCC_APPEND_FLAGS NVCC_PREPEND_FLAGS LDFLAGS CPATH LIBRARY_PATH LD_PRELOAD "
    "LD_LIBRARY_PATH PATH PYTHONPATH CUDA_VISIBLE_DEVICES CUDA_LAUNCH_BLOCKING CUDA_DEVICE_MAX_CONNECTIONS "
    "CUBLAS_WORKSPACE_CONFIG OMP_NUM_THREADS MKL_NUM_THREADS TORCH_CUDA_ARCH_LIST TORCH_EXTENSIONS_DIR "
    "TRITON_CACHE_DIR PYTORCH_CUDA_ALLOC_CONF".split()
)


def _defined_in(obj: Any) -> str:
    """The file the class of `obj` (or `obj`, a function) was compiled from: a candidate's lies in the worker's cache."""
    fn = obj if isinstance(obj, types.FunctionType) else None
    if fn is None:
        for v in vars(type(obj)).values():
            if isinstance(v, types.FunctionType):
                fn = v
                break
    return fn.__code__.co_filename if fn is not None else ""


def _torch_compile_worker(pid: int) -> bool:
    """A process of torch.compile's own pool of compile workers (inductor keeps it for the next compile)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"torch/_inductor/compile_worker" in f.read()
    except OSError:
        return False


def process_state() -> dict[str, Any]:
    """What a candidate could leave behind in its worker for the candidates after it, beside what `global_state` and
    `PatchGuard` watch: the working directory, the environment, builtins, signal and exception hooks, import paths and
    finders, and child processes. Read before and after each evaluation (`process_changes`)."""
    import builtins
    import os
    import signal
    import threading

    return {
        "working directory": os.getcwd(),
        "environment": dict(os.environ),
        "builtins": {k: id(v) for k, v in vars(builtins).items()},
        "signal handlers": tuple(
            (name, id(signal.getsignal(getattr(signal, name)))) for name in _SIGNALS if hasattr(signal, name)
        ),
        "exception hooks": (id(sys.excepthook), id(threading.excepthook), id(sys.unraisablehook)),
        "sys.path": list(sys.path),
        "import finders": [(id(f), _defined_in(f)) for f in (*sys.meta_path, *sys.path_hooks)],
        "child processes": _children(),
    }


def process_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What of `process_state` changed in a way a library's first import does not: a value replaced or removed, an
    environment variable of the toolchain's added, a path put before the others or outside Python's installation, an
    import finder compiled from a file under the working directory (a candidate's), a child process left running."""
    import os

    changed = []
    for key in ("working directory", "signal handlers", "exception hooks"):
        if before[key] != after[key]:
            changed.append(key)
    env0, env1 = before["environment"], after["environment"]
    if any(env1.get(k) != v for k, v in env0.items()) or any(k not in env0 and k in _ENV_WATCHED for k in env1):
        changed.append("environment")
    b0, b1 = before["builtins"], after["builtins"]
    if any(b1.get(k) != v for k, v in b0.items()):
        changed.append("builtins")
    p0, p1 = before["sys.path"], after["sys.path"]
    prefixes = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})
    if p1[: len(p0)] != p0 or any(not str(p).startswith(prefixes) for p in p1[len(p0) :]):
        changed.append("sys.path")
    cwd = os.getcwd()
    known = {i for i, _ in before["import finders"]}
    if any(i not in known and f.startswith(cwd) for i, f in after["import finders"]):
        changed.append("import finders")
    if any(not _torch_compile_worker(pid) for pid in set(after["child processes"]) - set(before["child processes"])):
        changed.append("child processes")
    return changed


# ---------------------------------------------------------------- process-wide state
_GLOBAL_HOOKS = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_forward_hooks_always_called",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
    "_global_buffer_registration_hooks",
    "_global_module_registration_hooks",
    "_global_parameter_registration_hooks",
)


#: the `global_state` key never rebased to what the task's code leaves: no task moves its threads between cores
SCHEDULING = "thread scheduling (CPU affinity, nice, policy)"
#: the `global_state` key of the dispatcher's kernels for the reference's operators, never rebased either: no task
#: registers kernels over torch's operators in its forward
DISPATCHER = "the dispatcher's kernels for the reference's operators"


def scheduling() -> tuple:
    """The distinct (CPU affinity, nice value, scheduling policy) of this process's threads (Linux; () elsewhere).
    Threads torch starts later inherit their creator's, so the set stays as it is unless code moves a thread to fewer
    cores, lowers its priority or makes it SCHED_IDLE: what a candidate (or a process of its) would do to the
    reference's threads. About 5 us a thread."""
    if not hasattr(os, "sched_getaffinity"):
        return ()
    seen = set()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return ()
    for tid in tids:
        try:
            t = int(tid)
            seen.add(
                (tuple(sorted(os.sched_getaffinity(t))), os.getpriority(os.PRIO_PROCESS, t), os.sched_getscheduler(t))
            )
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
    return tuple(sorted(seen))


def _signal_handlers() -> list[tuple[str, str]]:
    """(signal, its handler: SIG_DFL, SIG_IGN, or the function with its address) for the signals watched."""
    import signal

    out = []
    for name in _SIGNALS:
        if name == "SIGCONT" or not hasattr(signal, name):  # SIGCONT: the worker's own (`count_continues`)
            continue
        h = signal.getsignal(getattr(signal, name))
        if isinstance(h, signal.Handlers) or h is None:
            out.append((name, str(getattr(h, "name", h))))
        else:
            out.append((name, f"{getattr(h, '__qualname__', type(h).__name__)} at {id(h):#x}"))
    return out


def _timers_armed() -> tuple[bool, ...]:
    import signal

    if not hasattr(signal, "getitimer"):
        return ()
    return tuple(
        signal.getitimer(which) != (0.0, 0.0)
        for which in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
    )


def _adopts_orphans() -> bool | None:
    from ...sandbox import adopts_orphans

    return adopts_orphans()


def _read(get: Callable[[], Any]) -> Any:
    """A setting's value, or None where this torch has no such setting."""
    try:
        return get()
    except (AttributeError, RuntimeError, TypeError):
        return None


def _monitoring() -> tuple:
    """The `sys.monitoring` tools in use and their events (Python 3.12+): callbacks on every function start or line,
    the reference's included, that `sys.getprofile()` does not show."""
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return ()
    return tuple((i, mon.get_tool(i), mon.get_events(i)) for i in range(6) if mon.get_tool(i) is not None)


#: torch's intra-op threads as code in this process sees them (`thread_view`): "cap", the threads the worker fitted
#: to the cores it gets (None: no fit, calls go straight through); "asked", what ``get_num_threads`` answers then
_THREAD_VIEW: dict[str, int | None] = {"cap": None, "asked": None}
_THREAD_CALLS: dict[str, Any] = {}


def thread_view(threads: int, fitted: int | None) -> None:
    """Run torch on `fitted` threads while code in the process sees `threads` (the worker's own count), or, with
    `fitted` None, on `threads` with nothing hidden. Wraps ``torch.set_num_threads`` and ``torch.get_num_threads``
    (torch's and ``torch._C``'s names) once per process: under a fit, ``get_num_threads`` answers the count last
    asked for (at first `threads`) and ``set_num_threads(n)`` runs torch on ``min(n, fitted)``. So the fit the worker
    makes on a busy CPU (`WorkerState.fit_threads`) is invisible to candidate code: one that restores the count it
    read is honest as on an idle machine, one that leaves it lower is a change `global_state` sees, as there."""
    if not _THREAD_CALLS:
        _THREAD_CALLS["set"], _THREAD_CALLS["get"] = torch._C.set_num_threads, torch.get_num_threads

        def set_num_threads(n: int) -> None:
            cap = _THREAD_VIEW["cap"]
            if cap is None:
                _THREAD_CALLS["set"](n)
                return
            _THREAD_CALLS["set"](min(int(n), cap))  # n < 1 raises as torch's own does
            _THREAD_VIEW["asked"] = int(n)

        def get_num_threads() -> int:
            asked = _THREAD_VIEW["asked"]
            return _THREAD_CALLS["get"]() if _THREAD_VIEW["cap"] is None or asked is None else asked

        for name, fn in (("set_num_threads", set_num_threads), ("get_num_threads", get_num_threads)):
            setattr(torch, name, fn)
            setattr(torch._C, name, fn)
    _THREAD_VIEW["cap"], _THREAD_VIEW["asked"] = (None, None) if fitted is None else (fitted, threads)
    _THREAD_CALLS["set"](threads if fitted is None else fitted)


def threads_running() -> int:
    """The threads torch runs its parallel ops on now (under a `thread_view` fit, not what code sees)."""
    return (_THREAD_CALLS.get("get") or torch.get_num_threads)()


def global_state(kernels_of: list[str] | None = None) -> dict[str, tuple[str, Any]]:
    """What a candidate could change for the whole process to slow the reference, loosen its own check or reach into
    the reference's calls: thread counts, precision and backend flags, deterministic mode, torch function and dispatch
    modes, profile and trace functions, the process-wide module hooks and, with `kernels_of` (the reference's
    operators), the dispatcher's kernels for them. name -> (the check a change fails, value). About 55 us, and 16 us
    per operator of `kernels_of`: read after every candidate call (the kernels after some)."""
    backends = torch.backends
    module = sys.modules["torch.nn.modules.module"]
    state: dict[str, tuple[str, Any]] = {
        "torch.get_num_threads()": ("global_state", torch.get_num_threads()),
        "torch's threads running": ("global_state", threads_running()),
        "torch.get_num_interop_threads()": ("global_state", torch.get_num_interop_threads()),
        "torch.get_default_dtype()": ("global_state", torch.get_default_dtype()),
        "torch.get_float32_matmul_precision()": ("global_state", torch.get_float32_matmul_precision()),
        "torch.are_deterministic_algorithms_enabled()": ("global_state", torch.are_deterministic_algorithms_enabled()),
        "torch.backends.mkldnn.enabled": ("global_state", backends.mkldnn.enabled),
        "torch.backends.cudnn.enabled": ("global_state", backends.cudnn.enabled),
        "torch.backends.cudnn.benchmark": ("global_state", backends.cudnn.benchmark),
        "torch.backends.cudnn.deterministic": ("global_state", backends.cudnn.deterministic),
        "torch.backends.cudnn.allow_tf32": ("global_state", backends.cudnn.allow_tf32),
        "torch.backends.cuda.matmul.allow_tf32": ("global_state", backends.cuda.matmul.allow_tf32),
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": (
            "global_state",
            backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        ),
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": (
            "global_state",
            backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        ),
        "torch.backends.cuda.flash_sdp_enabled()": ("global_state", backends.cuda.flash_sdp_enabled()),
        "torch.backends.cuda.mem_efficient_sdp_enabled()": ("global_state", backends.cuda.mem_efficient_sdp_enabled()),
        "torch.backends.cuda.math_sdp_enabled()": ("global_state", backends.cuda.math_sdp_enabled()),
        "torch.backends.mha.get_fastpath_enabled()": ("global_state", _read(backends.mha.get_fastpath_enabled)),
        "torch.backends.cuda.preferred_blas_library()": (
            "global_state",
            _read(lambda: str(backends.cuda.preferred_blas_library())),
        ),
        "torch.backends.cuda.preferred_linalg_library()": (
            "global_state",
            _read(lambda: str(backends.cuda.preferred_linalg_library())),
        ),
        "torch.backends.cuda.cudnn_sdp_enabled()": ("global_state", _read(backends.cuda.cudnn_sdp_enabled)),
        "torch.backends.cudnn.benchmark_limit": ("global_state", _read(lambda: backends.cudnn.benchmark_limit)),
        "torch.backends.opt_einsum": (
            "global_state",
            _read(lambda: (backends.opt_einsum.enabled, backends.opt_einsum.strategy)),
        ),
        "torch.backends.mkldnn.deterministic": ("global_state", _read(lambda: backends.mkldnn.deterministic)),
        # the garbage collector: thresholds of 1 collect everything at every allocation, inside the reference's calls
        "gc (enabled, thresholds)": ("global_state", (gc.isenabled(), gc.get_threshold())),
        "sys.getswitchinterval()": ("global_state", sys.getswitchinterval()),
        "gc.callbacks": ("global_hooks", tuple(map(id, gc.callbacks))),
        "torch's profiler on": ("global_hooks", _read(torch._C._autograd._profiler_enabled)),
        "sys.monitoring tools": ("global_hooks", _monitoring()),
        "torch function modes": ("global_hooks", torch._C._len_torch_function_stack()),
        "torch dispatch modes": ("global_hooks", torch._C._len_torch_dispatch_stack()),
        "sys.setprofile": ("global_hooks", sys.getprofile() is not None),
        "sys.settrace": ("global_hooks", sys.gettrace() is not None),
        # a handler runs in the main thread, inside whatever call the signal interrupts: the reference's, when a
        # timer or a process of the candidate's sends it
        **{f"{name} handler": ("global_hooks", handler) for name, handler in _signal_handlers()},
        "interval timers armed": ("global_hooks", _timers_armed()),
        # how the process's threads are scheduled: one core, a lower priority or SCHED_IDLE for the reference
        SCHEDULING: ("global_state", scheduling()),
        # what lets the worker see the processes a candidate starts, and know when it was stopped and continued
        "orphans adopted (PR_SET_CHILD_SUBREAPER)": ("global_state", _adopts_orphans()),
        "SIGCONT handler and mask": ("global_state", _continue_watch_state()),
    }
    if kernels_of is not None:  # kernels registered over the reference's operators: code no Python hook shows
        state[DISPATCHER] = ("global_hooks", tuple(kernel_changes(kernels_of)))
    for name in _GLOBAL_HOOKS:
        hooks = getattr(module, name, None)
        if hooks is not None:
            state[f"torch.nn.modules.module.{name}"] = ("global_hooks", len(hooks))
    return state


def state_changes(before: dict[str, tuple[str, Any]], after: dict[str, tuple[str, Any]]) -> dict[str, list[str]]:
    """check -> the changes between two `global_state` readings that fail it ("torch.get_num_threads(): 16 -> 1")."""
    out: dict[str, list[str]] = {}
    for key, (check, value) in after.items():
        old = before.get(key, (check, None))[1]
        if old != value:
            out.setdefault(check, []).append(f"{key}: {old} -> {value}")
    return out


# ---------------------------------------------------------------- the dispatcher's kernels
#: every operator's registrations, as the dispatcher lists them, taken before any candidate code ran in this process
#: (the worker's start, or the zygote's it was forked from)
_KERNELS0: dict[str, frozenset[str]] = {}


def _registrations(op: str) -> frozenset[str]:
    """`op`'s kernel registrations: one line per dispatch key, with where it was registered, its signature (a Python
    kernel has none: "(none) [ boxed ]") and whether a later registration replaced it ("(inactive)"). Meta kernels
    (shapes only, and torch's own Python ones replace C++ ones by design) are left out."""
    return frozenset(
        line
        for line in torch._C._dispatch_dump(op).splitlines()
        if ": registered at " in line and not line.startswith(("Meta:", "Meta (inactive):"))
    )


def snapshot_kernels() -> None:
    """(Before any candidate code runs in this process, once.) Every operator's registrations (~70 ms)."""
    if not _KERNELS0:
        _KERNELS0.update({op: _registrations(op) for op in torch._C._dispatch_get_all_op_names()})


def kernels_snapshotted() -> bool:
    return bool(_KERNELS0)


def watch_reference_ops(run: Callable[[], Any]) -> list[str]:
    """The operators `run` (a reference call) reaches, recorded once per task: each aten operator below autograd, as
    dispatched (a `TorchDispatchMode`), and every overload of each torch function it calls by name (a
    `TorchFunctionMode`: `torch.softmax` is `aten::softmax.int`, a composite no dispatch mode sees). A kernel
    registered over one of them would run inside the reference's calls."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: set[str] = set()
    called: set[str] = set()

    class _Ops(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:  # else wrapped by torch._disable_dynamo, which imports the compiler
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            schema = func._schema
            seen.add(schema.name + (f".{schema.overload_name}" if schema.overload_name else ""))
            return func(*args, **(kwargs or {}))

    class _Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            called.add(getattr(func, "__name__", "").strip("_"))
            return func(*args, **(kwargs or {}))

    with _Functions(), _Ops():
        run()
    overloads: dict[str, list[str]] = {}
    for op in torch._C._dispatch_get_all_op_names():
        if op.startswith("aten::"):
            overloads.setdefault(op.split(".", 1)[0].removeprefix("aten::"), []).append(op)
    named = {op for name in called for op in overloads.get(name, [])}
    return sorted(seen | named)


def _torch_dir() -> str:
    return os.path.dirname(torch.__file__) + os.sep


def kernel_changes(ops: Iterable[str] | None = None) -> list[str]:
    """'op: what changed' for each of `ops` (None: every operator) whose kernels differ from the snapshot in a way
    only code that reaches into the dispatcher makes (`torch.library`, `torch._C._dispatch_library`): a kernel
    replaced (the old one stays listed as inactive, whatever location the new one claims), a registration removed,
    any new one on an `aten` operator, or one registered outside torch's own files; on an operator defined since (a
    library the task imports, torchvision's), a replaced kernel. Torch's own lazy imports add registrations to their
    own operators only (the distributed collectives, when the compiler is imported)."""
    if not _KERNELS0:
        return []
    out: list[str] = []
    torch_dir = _torch_dir()
    for op in _KERNELS0 if ops is None else ops:
        try:
            now = _registrations(op)
        except RuntimeError:  # an operator the snapshot never saw, gone again
            continue
        before = _KERNELS0.get(op)
        if before is None:  # an operator defined since (a library the task imports): only a replaced kernel counts
            if any("(inactive)" in line for line in now):
                line = next((line for line in sorted(now) if "(inactive)" not in line), "")
                out.append(f"{op}: registered {line.split(' :: ')[0]}")
            continue
        if now == before:
            continue
        added, removed = now - before, before - now
        if (
            removed
            or op.startswith("aten::")
            or any("(inactive)" in line or f"registered at {torch_dir}" not in line for line in added)
        ):
            line = next(iter(sorted(added or removed)))
            out.append(f"{op}: {'registered ' if added else 'removed '}{line.split(' :: ')[0]}")
    return out


# ---------------------------------------------------------------- processes the candidate left running
_CONTINUED = [0]
_ON_CONTINUE: list[Any] = []


def count_continues() -> None:
    """(The worker's main, at start.) Count the times this process is continued after a stop (SIGCONT): a process
    of the candidate's that stops the worker (SIGSTOP) while the reference runs makes it slower without using CPU
    or changing anything in the worker, and each stop needs a continue. Standard signals coalesce: a count above 0
    says "stopped at least once"."""
    import signal

    def on_continue(_signum: int, _frame: Any) -> None:
        _CONTINUED[0] += 1

    try:
        signal.signal(signal.SIGCONT, on_continue)
    except (ValueError, OSError, AttributeError):  # not the main thread, or no such signal here
        return
    _ON_CONTINUE[:] = [on_continue]


def continues() -> int:
    """How many times this process was continued after a stop since `count_continues` (a handler's count: signals
    that came while it was blocked are counted when it runs)."""
    return _CONTINUED[0]


def _continue_watch_state() -> tuple[bool, bool]:
    """(the SIGCONT handler is still the worker's, SIGCONT is not blocked in the main thread)"""
    import signal
    import threading

    if not _ON_CONTINUE:
        return (True, True)
    handler_kept = signal.getsignal(signal.SIGCONT) is _ON_CONTINUE[0]
    unblocked = True
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask"):
        unblocked = signal.SIGCONT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return (handler_kept, unblocked)


def _cpu_seconds_of(pid: int, tids: list[str]) -> float | None:
    """CPU seconds process `pid` has used, all its threads `tids` (nanoseconds from /proc/PID/task/*/schedstat; the
    clock ticks of /proc/PID/stat where that is missing); None once it is gone."""
    total, read = 0.0, False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0]) / 1e9
                read = True
        except (OSError, ValueError, IndexError):
            continue
    if read:
        return total
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def descendants() -> dict[int, tuple[str, float]]:
    """This process's live descendants (Linux: /proc's children lists, walked down; zombies left out): pid ->
    (command name, CPU seconds used so far). The worker adopts orphans (`sandbox.adopt_orphans`), so a process that
    double-forks stays among them. {} where /proc cannot be read."""
    out: dict[int, tuple[str, float]] = {}
    todo, seen = [os.getpid()], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                continue
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            if rest.split()[0] in ("Z", "X"):
                continue
            name = head.split("(", 1)[1]
        except (OSError, ValueError, IndexError):
            continue
        cpu = _cpu_seconds_of(pid, tids)
        if cpu is not None:
            out[pid] = (name, cpu)
    return out


# ---------------------------------------------------------------- threads the candidate left running
def thread_cpu_seconds(exclude: set[int]) -> dict[int, tuple[str, float]]:
    """CPU seconds each live Python thread not in `exclude` (the harness's own) has used so far: ident -> (name,
    seconds). Native threads (torch's OpenMP pool, CUDA's) are not Python threads and are not read."""
    import threading
    import time

    out: dict[int, tuple[str, float]] = {}
    for t in threading.enumerate():
        if t.ident is None or t.ident in exclude:
            continue
        try:
            out[t.ident] = (t.name, time.clock_gettime(time.pthread_getcpuclockid(t.ident)))
        except (OSError, AttributeError, ValueError):  # gone meanwhile, or no per-thread clocks on this system
            continue
    return out


class ThreadWatch:
    """The CPU the candidate's threads and processes use while a stage runs (`background_threads`): a thread or a
    process it started and left running takes cores from the reference's calls and timings, and needs no hook to do
    it; a process of its that stops and continues the worker (SIGSTOP, SIGCONT) slows them without any CPU. Threads
    and processes that sit idle (a library's compile pool) use none and never stop it."""

    #: a stage fails when the candidate's threads used more CPU than this share of its wall time, and this much
    SHARE, FLOOR_S = 0.05, 0.02

    def __init__(self, harness_threads: set[int]) -> None:
        import time

        self.harness = harness_threads
        self.t0 = time.perf_counter()
        self.continued0 = continues()
        self.processes: dict[int, str] = {}  # the candidate's processes seen alive while the stage ran
        self.cpu0 = self._theirs()
        self.own = 0.0  # CPU its threads and processes used inside the candidate's own calls: its work, not stolen
        self._in_call: dict[Any, tuple[str, float]] | None = None
        self.working: list[str] = []  # its threads seen running code of their own outside its calls
        self.left_running: list[str] = []  # its threads still in its code right after one of its calls returned

    def _theirs(self) -> dict[Any, tuple[str, float]]:
        """CPU seconds so far of each of the candidate's threads (by ident) and processes (by ("process", pid))."""
        out: dict[Any, tuple[str, float]] = dict(thread_cpu_seconds(self.harness))
        for pid, (name, cpu) in descendants().items():
            label = f"process {pid} ({name})"
            self.processes[pid] = label
            out[("process", pid)] = (label, cpu)
        return out

    def alive(self) -> int:
        """How many threads and processes of the candidate's are alive now."""
        return len(self._theirs())

    def sample(self) -> None:
        """Where each of the candidate's threads is, now that none of its calls runs: one with the candidate's own
        code on its stack (its loop, the torch calls it makes from there) works beside the reference; one waiting in
        a library (a pool's queue, a compiler's reader thread) is idle. The native threads a torch call starts are not
        Python threads: this sees the Python thread that makes the call, where CPU clocks would miss them."""
        self._record(self.working, self._running_own_code())

    def returned(self) -> None:
        """Right after one of the candidate's calls returned: a thread of its own still in its code then was started
        by the call and not joined (a join with a timeout that ran out, a thread it never waits for). It may still
        write into what the call returned, or into a buffer the next call hands out; it fails the stage whether or
        not it uses CPU, and whether or not its late writes happen to leave the right values."""
        self._record(self.left_running, self._running_own_code())

    @staticmethod
    def _record(into: list[str], seen: list[str]) -> None:
        for where in seen:
            if len(into) >= 20:
                break
            into.append(where)

    def _running_own_code(self) -> list[str]:
        """'thread-name at file:line' for each thread of the candidate's (not the harness's) with code loaded from
        the module cache (the candidate's or the task's own files) on its stack now."""
        import threading

        from .loading import cache_dir

        code = str(cache_dir() / "modules")  # where the candidate's (and the task's) module files are loaded from
        names = {t.ident: t.name for t in threading.enumerate()}
        out: list[str] = []
        frames = sys._current_frames()
        frame = top = None
        try:
            for ident, top in frames.items():
                if ident in self.harness or ident not in names:
                    continue
                frame, depth = top, 0
                while frame is not None and depth < 64:
                    if frame.f_code.co_filename.startswith(code):
                        where = frame.f_code.co_filename.rsplit("/", 1)[-1]
                        out.append(f"{names[ident]} at {where}:{frame.f_lineno}")
                        break
                    frame, depth = frame.f_back, depth + 1
        finally:
            # the frames (this one among them) would hold their callers' locals, the inputs too, in a cycle
            del frames, frame, top
        return out

    def call_begins(self) -> None:
        self._in_call = self._theirs()

    def call_ends(self) -> None:
        if self._in_call is None:
            return
        for key, (_name, cpu) in self._theirs().items():
            self.own += max(0.0, cpu - self._in_call.get(key, ("", 0.0))[1])
        self._in_call = None

    def stolen(self, own: float | None = None) -> tuple[float, float, list[str]]:
        """(CPU seconds the candidate's threads and processes used since the watch began outside its own calls, the
        stage's wall seconds, which of them used how much in all). `own`: CPU inside its calls, where
        `call_begins`/`call_ends` did not count it."""
        import time

        wall = time.perf_counter() - self.t0
        used, who = 0.0, []
        for key, (name, cpu) in self._theirs().items():
            d = cpu - self.cpu0.get(key, (name, 0.0))[1]
            if d > 0.001:
                used += d
                who.append(f"{name} {1e3 * d:.0f} ms")
        return max(0.0, used - (self.own if own is None else own)), wall, who

    def too_much(self, own: float | None = None) -> str:
        """'' where the candidate's threads and processes kept to its own calls, else what they did outside them."""
        used, wall, who = self.stolen(own)
        if used > max(self.FLOOR_S, self.SHARE * wall):
            return f"{1e3 * used:.0f} ms of CPU outside its calls in {1e3 * wall:.0f} ms ({', '.join(who[:4])})"
        stops = continues() - self.continued0
        if stops and self.processes:
            return (
                f"the worker was stopped and continued (SIGSTOP/SIGCONT) while the stage ran, with processes of the "
                f"candidate's alive ({', '.join(list(self.processes.values())[:4])})"
            )
        if self.left_running:
            seen = list(dict.fromkeys(self.left_running))
            return f"still running its own code when the call that started them returned ({', '.join(seen[:4])})"
        if self.working:
            seen = list(dict.fromkeys(self.working))
            return f"running its own code while the reference ran ({', '.join(seen[:4])})"
        return ""


# ---------------------------------------------------------------- poisoning freed memory
def poison_free_cuda_memory(device: torch.device) -> int:
    """Fill the caching allocator's free blocks with 0xFF bytes (NaN in every float format).

    A candidate that returns uninitialized memory hoping it still holds the reference's
    output then returns NaN instead. Returns the number of bytes poisoned.
    """
    torch.cuda.synchronize(device)
    blocks = []
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device") != device.index:
            continue
        for blk in seg.get("blocks", []):
            if blk.get("state") == "inactive" and blk.get("size", 0) > 0:
                blocks.append(int(blk["size"]))
    held = []
    total = 0
    with torch.cuda.device(device):
        for size in sorted(blocks, reverse=True):
            t = torch.empty(size, dtype=torch.uint8, device=device)
            t.fill_(0xFF)
            held.append(t)
            total += size
    torch.cuda.synchronize(device)
    del held
    return total


def poison_free_cpu_memory(nbytes: int) -> None:
    """Best effort on CPU: leave NaN-filled chunks in the allocator's free lists."""
    held = [torch.full((max(nbytes // 4, 1),), float("nan")) for _ in range(2)]
    del held
