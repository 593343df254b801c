"""The generated public class of a rewrite: same name, constructor and ``state_dict`` keys as the
user's class, its ``forward`` guarded to run the candidate only on calls like the verified ones;
its recording ``__init__`` and the names it uses for the modules it imports."""

from __future__ import annotations

import ast
import io
import re
import tokenize

from .domain import VerifiedDomain
from .scopes import all_loads, bindings, unique_name
from .user_file import Binding

#: names in the original class that make its result depend on train()/eval().
_MODE_WORDS = re.compile(
    r"training|dropout\w*|\w*Dropout\w*|batch_norm|\w*BatchNorm\w*|instance_norm|\w*InstanceNorm\w*|"
    r"RNN\w*|LSTM\w*|GRU\w*|MultiheadAttention|Transformer\w*"
)


def _mode_sensitive(cls: ast.ClassDef) -> bool:
    """Whether the class's code names dropout, batch norm, RNNs... or reads `training`."""
    idents = {n.id for n in ast.walk(cls) if isinstance(n, ast.Name)}
    idents |= {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute)}
    return any(_MODE_WORDS.fullmatch(i) for i in idents)


def _params_text(lines: list[str], fn: ast.FunctionDef) -> str:
    """The parameter list of `fn` as written (between its parentheses), else as ast prints it."""
    seg = [line.rstrip("\r\n") + "\n" for line in lines[fn.lineno - 1 : fn.end_lineno]]
    depth, start = 0, None
    try:
        for tok in tokenize.generate_tokens(io.StringIO("".join(seg)).readline):
            if tok.type != tokenize.OP or tok.string not in "()":
                continue
            if tok.string == "(":
                depth += 1
                if depth == 1:
                    start = tok.end
            else:
                depth -= 1
                if depth == 0 and start is not None:
                    (r0, c0), (r1, c1) = start, tok.start
                    if r0 == r1:
                        return seg[r0 - 1][c0:c1]
                    return seg[r0 - 1][c0:] + "".join(seg[r0 : r1 - 1]) + seg[r1 - 1][:c1]
    except (tokenize.TokenError, SyntaxError):
        pass
    return ast.unparse(fn.args)


def init_source(cls: ast.ClassDef, lines: list[str]) -> tuple[str, bool]:
    """The recording ``__init__`` (text, needs_inspect): the original's parameter list when it
    can be repeated as written, else ``*args, **kwargs`` with the original's signature attached."""
    init = _repeatable_init(cls)
    if init is not None:
        return _recording_init(init, lines), False
    return (
        "    def __init__(self, *args, **kwargs):\n"
        "        super().__init__(*args, **kwargs)\n"
        '        self.__dict__["_forge_init"] = (args, kwargs)  # not registered: state_dict unchanged\n'
    ), True


def _repeatable_init(cls: ast.ClassDef) -> ast.FunctionDef | None:
    """The class's own ``__init__`` when it can be repeated as written: undecorated, with positional
    parameters, and defaults and annotations that read no name of the class body."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None or init.decorator_list or not (init.args.posonlyargs or init.args.args):
        return None
    a = init.args
    evaluated = a.defaults + [d for d in a.kw_defaults if d is not None]
    evaluated += [
        x.annotation
        for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
        if x is not None and x.annotation is not None
    ]
    evaluated += [init.returns] if init.returns is not None else []
    class_names = bindings(cls.body)[0]
    return None if any(all_loads(e) & class_names for e in evaluated) else init


def _recording_init(init: ast.FunctionDef, lines: list[str]) -> str:
    """An ``__init__`` with the parameters of `init` as written, recording its arguments."""
    a = init.args
    params = a.posonlyargs + a.args
    me = params[0].arg
    pos = [p.arg for p in params[1:]] + ([f"*{a.vararg.arg}"] if a.vararg else [])
    kws = [f"{k.arg}={k.arg}" for k in a.kwonlyargs] + ([f"**{a.kwarg.arg}"] if a.kwarg else [])
    sig = _params_text(lines, init)
    ret = (
        f" -> {ast.get_source_segment(''.join(lines), init.returns) or ast.unparse(init.returns)}"
        if init.returns is not None
        else ""
    )
    call = ", ".join(pos + kws)
    tup = "(" + ", ".join(pos) + ("," if len(pos) == 1 else "") + ")"
    kwd = (
        "{" + ", ".join([f'"{k.arg}": {k.arg}' for k in a.kwonlyargs] + ([f"**{a.kwarg.arg}"] if a.kwarg else [])) + "}"
    )
    return (
        f"    def __init__({sig}){ret}:\n"
        f"        super().__init__({call})\n"
        f'        {me}.__dict__["_forge_init"] = ({tup}, {kwd})  # not registered: state_dict unchanged\n'
    )


_TEMPLATE = '''\
class {name}({ref}):
    """{name} running forge's verified kernels ({forge}) on calls like the verified ones.

    Same constructor and state_dict keys as {ref}, the original class: its checkpoints
    load as they are. forward() runs {forge} for positional tensor arguments like those verified:
        {domain}
    and {ref}.forward for anything else, or always with FORGE_DISABLE=1 in the environment.
    {forge} is built on the first such call and uses this module's own parameters and
    buffers (the same tensor objects, shared again whenever one is replaced).
    """

    _forge_devices = {devices}  # verified: device types,
    _forge_dtypes = {dtypes}  # dtypes of the tensor arguments,
    _forge_ranks = {ranks}  # rank of each tensor argument, in order,
    _forge_contiguous = {contiguous}  # contiguous tensor arguments only,
    _forge_sizes = {sizes}  # verified sizes of each dimension of each tensor argument (None: any),
    _forge_training = {training}  # module mode (checked when the output depends on it)
    _forge_mode_sensitive = {mode_sensitive}  # whether {ref} mentions dropout, batch norm, training...
    _forge_calls = {{"optimized": 0, "reference": 0}}  # how eager calls were routed, all instances

{init}{signature}
    def forward(self, *args, **kwargs):
        impl = self._forge_impl(args, kwargs)
        counted = not {torch}.compiler.is_compiling()  # a count torch.compile traced would recompile every call
        if impl is None:
            if counted:
                self._forge_calls["reference"] += 1
            return super().forward(*args, **kwargs)
        if counted:
            self._forge_calls["optimized"] += 1
        return impl(*args)

    def _forge_impl(self, args, kwargs):
        """The kernels' module when this call is inside the verified domain, else None."""
        if kwargs or {os}.environ.get("FORGE_DISABLE", "") not in ("", "0") or "_forge_init" not in self.__dict__:
            return None
        grad, ranks, sizes, device, n = {torch}.is_grad_enabled(), self._forge_ranks, self._forge_sizes, None, 0
        for a in args:
            if isinstance(a, {torch}.Tensor):
                if (n == len(ranks) or a.dim() != ranks[n] or a.dtype not in self._forge_dtypes
                        or a.device.type not in self._forge_devices or a.numel() == 0
                        or (self._forge_contiguous and not a.is_contiguous()) or (grad and a.requires_grad)
                        or (sizes is not None and any(s is not None and a.shape[d] not in s
                                                      for d, s in enumerate(sizes[n])))):
                    return None
                device, n = a.device, n + 1
        if n != len(ranks):
            return None
{stream_check}        rt = self.__dict__.get("_forge_runtime")
        if rt is None or rt[1] != device or not all(
                h.get(k) is v and (d is None or v.dtype is d) for h, k, v, d in rt[2]):
            rt = self._forge_share(device)
        impl, _, _, usable, params, mode_sensitive = rt
        # weights made non-contiguous since (`.to(memory_format=...)`): verified on dense ones
        if not usable or (grad and any(p.requires_grad for p in params)) or not all(p.is_contiguous() for p in params):
            return None
        if mode_sensitive and self._forge_training is not None and self.training != self._forge_training:
            return None
        if impl.training != self.training:
            impl.train(self.training)
        return impl

    def _forge_share(self, device):
        """Build {forge} once, then make it use this module's parameters and buffers."""
        rt = self.__dict__.get("_forge_runtime")
        if rt is not None:
            impl = rt[0]
        else:
            args, kwargs = self.__dict__["_forge_init"]
            impl = {forge}(*args, **kwargs)
        shared, params, usable = set(), [], True
        for key, value in self.state_dict(keep_vars=True).items():
            if not isinstance(value, {torch}.Tensor):
                continue
            prefix, _, leaf = key.rpartition(".")
            try:
                owner = impl.get_submodule(prefix)
            except AttributeError:
                usable = False
                break
            slots = owner._parameters if leaf in owner._parameters else owner._buffers
            if leaf not in slots:
                usable = False
                break
            slots[leaf] = value  # the same tensor object: in-place updates are seen by both
            shared.add(id(value))
            if isinstance(value, {torch}.nn.Parameter):
                params.append(value)
            usable = usable and value.device.type in self._forge_devices and (
                not value.is_floating_point() or value.dtype in self._forge_dtypes)
        for m in impl.modules():  # the kernels' own tensors (not in state_dict) follow the inputs
            for slots in (m._parameters, m._buffers):
                for k, v in slots.items():
                    if v is not None and id(v) not in shared and v.device != device:
                        moved = v.to(device)
                        slots[k] = {torch}.nn.Parameter(moved, v.requires_grad) if isinstance(
                            v, {torch}.nn.Parameter) else moved
        watch = [(slots, k, v, v.dtype if isinstance(v, {torch}.Tensor) else None) for m in self.modules()
                 for slots in (m._modules, m._parameters, m._buffers) for k, v in slots.items()]
        mode_layers = ({torch}.nn.modules.dropout._DropoutNd, {torch}.nn.modules.batchnorm._NormBase,
                       {torch}.nn.RNNBase, {torch}.nn.MultiheadAttention)
        mode_sensitive = self._forge_mode_sensitive or any(isinstance(m, mode_layers) for m in self.modules())
        rt = (impl, device, watch, usable, params, mode_sensitive)
        self.__dict__["_forge_runtime"] = rt
        return rt

    def __getstate__(self):
        # pickles and deep copies hold the module, not the kernels' instance (rebuilt on use)
        state = super().__getstate__()
        if isinstance(state, dict) and "_forge_runtime" in state:
            state = {{k: v for k, v in state.items() if k != "_forge_runtime"}}
        return state
'''


#: The stream rule, emitted only for a domain verified on the default stream alone: a CUDA call made on another
#: stream (a side stream; CUDA-graph capture, which always runs on one) runs the original.
_STREAM_CHECK = """\
        # verified on the device's default stream only: not on a side stream, not under CUDA-graph capture
        if device is not None and device.type == "cuda" and (
                {torch}.cuda.current_stream(device) != {torch}.cuda.default_stream(device)
                or {torch}.cuda.is_current_stream_capturing()):
            return None
"""


def _tuple_text(xs: list[str]) -> str:
    return "(" + ", ".join(xs) + ("," if len(xs) == 1 else "") + ")"


def wrapper_class(
    cls: ast.ClassDef,
    ref_name: str,
    forge_name: str,
    domain: VerifiedDomain,
    init: str,
    modules: dict[str, str],
) -> str:
    """The public class: `cls`'s name, deriving from `ref_name` (the original), running `forge_name`
    inside `domain`; `modules` names torch, os (and inspect, when `init` needs it) in the file."""
    signature = (
        f"    __init__.__signature__ = {modules['inspect']}.signature({ref_name}.__init__)\n"
        if "inspect" in modules
        else ""
    )
    return _TEMPLATE.format(
        name=cls.name,
        ref=ref_name,
        forge=forge_name,
        domain=domain.describe(),
        devices=_tuple_text([repr(d) for d in domain.device_types]),
        dtypes=_tuple_text([f"{modules['torch']}.{d}" for d in domain.dtypes]),
        ranks=_tuple_text([str(r) for r in domain.ranks]),
        contiguous=domain.contiguous,
        sizes=_sizes_text(domain.sizes),
        training=domain.training,
        stream_check=_STREAM_CHECK.format(torch=modules["torch"]) if domain.default_stream else "",
        mode_sensitive=_mode_sensitive(cls),
        init=init,
        signature=signature,
        torch=modules["torch"],
        os=modules["os"],
    )


def _sizes_text(sizes: list[list[list[int] | None]] | None) -> str:
    if sizes is None:
        return "None"
    return _tuple_text(
        [_tuple_text(["None" if s is None else _tuple_text([str(v) for v in s]) for s in arg]) for arg in sizes]
    )


def module_name(
    module: str, user_binds: dict[str, list[Binding]], block_binds: dict[str, tuple | None], taken: set[str]
) -> tuple[str, str | None]:
    """(name to use for `module` in the generated class, import line to add or None)."""
    desc = ("module", module)
    seen = user_binds.get(module, [])
    if seen and all(d == desc for d, _ in seen) and any(b for _, b in seen):
        return module, None
    if module in block_binds and block_binds[module] == desc and not seen:
        return module, None
    if not seen and module not in block_binds and module not in taken:
        taken.add(module)
        return module, f"import {module}"
    alias = unique_name(f"_forge_{module}", taken)
    return alias, f"import {module} as {alias}"
