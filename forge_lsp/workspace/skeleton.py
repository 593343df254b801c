"""The "add example inputs" quick fix: ``get_inputs()`` / ``get_init_inputs()`` for a module that has none.

Read from the AST only. Sizes are inferred where the code says enough:

* constructor parameters become module-level constants (KernelBench style): a literal default is
  kept; otherwise the value comes from how ``__init__`` uses the parameter (``nn.Linear(in_features,
  ...)`` -> 64, ``kernel_size`` of a conv -> 3, a ``dim=`` argument -> 1, ...), then from its annotation
  and name. ``get_init_inputs()`` passes, in order, every required parameter and every parameter an
  input shape depends on; later defaulted parameters keep their defaults.
* each tensor argument of ``forward`` gets its shape from the first layer it flows into (through
  shape-preserving calls such as activations and dropout): ``nn.Linear(f, ...)`` -> ``(batch_size, f)``,
  ``nn.ConvNd(c, ...)`` -> ``(batch_size, c, *spatial)``, ``nn.LayerNorm(d)`` -> ``(batch_size, seq_len,
  d)`` (or ``(batch_size, *shape)`` for a tuple), ``nn.Embedding(n, ...)`` -> integer indices,
  ``torch.matmul(A, B)`` / ``A @ B`` -> ``(M, K)`` and ``(K, N)``. What cannot be inferred gets a
  placeholder and a ``# TODO`` comment saying so.

Only the missing function(s) are generated; existing module-level constants of the same name are
reused rather than redefined.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field

from .index import (
    _classes_from_broken_chunk,
    _parse_tolerant,
    _top_level,
    import_aliases,
    qualify,
    split_lines,
    torch_nn_class,
)


@dataclass(frozen=True)
class Insertion:
    """Insert ``text`` at (0-based ``line``, ``character`` in str indices)."""

    line: int
    character: int
    text: str


# positional parameters of the torch.nn layers whose arguments say something about sizes
_LAYER_ARGS: dict[str, tuple[str, ...]] = {
    "Linear": ("in_features", "out_features", "bias"),
    "Bilinear": ("in1_features", "in2_features", "out_features", "bias"),
    **{
        f"Conv{d}d": ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias")
        for d in (1, 2, 3)
    },
    **{
        f"ConvTranspose{d}d": (
            "in_channels",
            "out_channels",
            "kernel_size",
            "stride",
            "padding",
            "output_padding",
            "groups",
            "bias",
            "dilation",
        )
        for d in (1, 2, 3)
    },
    **{
        f"{n}{d}d": ("num_features", "eps", "momentum", "affine")
        for n in ("BatchNorm", "InstanceNorm")
        for d in (1, 2, 3)
    },
    "GroupNorm": ("num_groups", "num_channels", "eps", "affine"),
    "LayerNorm": ("normalized_shape", "eps", "elementwise_affine"),
    "RMSNorm": ("normalized_shape", "eps", "elementwise_affine"),
    "Embedding": ("num_embeddings", "embedding_dim", "padding_idx"),
    "EmbeddingBag": ("num_embeddings", "embedding_dim"),
    "MultiheadAttention": ("embed_dim", "num_heads", "dropout"),
    "LSTM": ("input_size", "hidden_size", "num_layers"),
    "GRU": ("input_size", "hidden_size", "num_layers"),
    "RNN": ("input_size", "hidden_size", "num_layers"),
    "TransformerEncoderLayer": ("d_model", "nhead", "dim_feedforward", "dropout"),
    "TransformerDecoderLayer": ("d_model", "nhead", "dim_feedforward", "dropout"),
    "Dropout": ("p",),
    "Softmax": ("dim",),
    "LogSoftmax": ("dim",),
    **{f"{n}Pool{d}d": ("kernel_size", "stride", "padding") for n in ("Max", "Avg") for d in (1, 2, 3)},
}

#: Layers that keep their input's shape (an input flows through them to the layer that fixes its shape).
_PRESERVING_LAYERS = frozenset(
    {
        "ReLU",
        "ReLU6",
        "GELU",
        "SiLU",
        "Tanh",
        "Sigmoid",
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Dropout3d",
        "AlphaDropout",
        "Identity",
        "Softmax",
        "LogSoftmax",
        "LeakyReLU",
        "ELU",
        "SELU",
        "CELU",
        "Hardswish",
        "Hardsigmoid",
        "Hardtanh",
        "Mish",
        "Softplus",
        "Softsign",
        "PReLU",
        "Tanhshrink",
    }
)
_PRESERVING_CALLS = frozenset(
    {
        "relu",
        "relu_",
        "relu6",
        "gelu",
        "silu",
        "sigmoid",
        "tanh",
        "dropout",
        "softmax",
        "log_softmax",
        "leaky_relu",
        "elu",
        "selu",
        "celu",
        "hardswish",
        "hardsigmoid",
        "hardtanh",
        "mish",
        "softplus",
        "abs",
        "exp",
        "log",
        "clamp",
        "clip",
        "neg",
        "sqrt",
        "rsqrt",
        "square",
        "contiguous",
        "clone",
        "float",
        "half",
        "bfloat16",
        "double",
        "to",
        "detach",
        "sin",
        "cos",
        "erf",
        "sign",
        "reciprocal",
    }
)
_REDUCTIONS = frozenset(
    {
        "sum",
        "mean",
        "softmax",
        "log_softmax",
        "cumsum",
        "cumprod",
        "argmax",
        "argmin",
        "max",
        "min",
        "prod",
        "norm",
        "std",
        "var",
        "logsumexp",
        "amax",
        "amin",
        "all",
        "any",
        "median",
        "mode",
        "flip",
        "squeeze",
        "unsqueeze",
    }
)

_ROLE_VALUES: dict[str, object] = {
    "in_features": 64,
    "out_features": 64,
    "in1_features": 64,
    "in2_features": 64,
    "num_features": 16,
    "normalized_shape": 64,
    "embedding_dim": 64,
    "embed_dim": 64,
    "d_model": 64,
    "input_size": 64,
    "hidden_size": 64,
    "dim_feedforward": 128,
    "num_channels": 16,
    "num_groups": 4,
    "in_channels": 16,
    "out_channels": 16,
    "kernel_size": 3,
    "stride": 1,
    "padding": 1,
    "dilation": 1,
    "groups": 1,
    "output_padding": 0,
    "num_heads": 4,
    "nhead": 4,
    "num_embeddings": 1000,
    "num_layers": 1,
    "p": 0.0,
    "dropout": 0.0,
    "eps": 1e-5,
    "momentum": 0.1,
    "bias": True,
    "affine": True,
    "elementwise_affine": True,
    "dim": 1,
    "axis": 1,
}
_POOL_ROLE_VALUES = {"kernel_size": 2, "stride": 2, "padding": 0}

_NAME_RULES: list[tuple[re.Pattern[str], object]] = [
    (re.compile(p), v)
    for p, v in [
        (r"batch_first", True),
        (r"batch", 16),
        (r"(^|_)eps", 1e-5),
        (r"momentum", 0.1),
        (r"dropout|^p$|_p$|prob|rate", 0.0),
        (r"num_groups", 4),
        (r"head", 4),
        (r"kernel", 3),
        (r"stride", 1),
        (r"padding_idx", None),
        (r"pad", 1),
        (r"dilation", 1),
        (r"groups", 1),
        (r"vocab|num_embeddings|num_tokens", 1000),
        (r"class", 10),
        (r"layer|depth|blocks", 2),
        (r"seq|len", 128),
        (r"channel", 16),
        (r"feature|dim|hidden|embed|size|width|d_model|units|neurons", 64),
        (r"scale|alpha|beta|gamma|factor|temperature|weight|slope", 1.0),
        (r"inplace", False),
        (r"bias|affine|use_|enable|residual", True),
    ]
]

#: Size constants for dimensions the constructor does not give: name -> value.
_DIMS = {
    "batch_size": 16,
    "seq_len": 128,
    "length": 128,
    "depth": 16,
    "height": 32,
    "width": 32,
    "M": 256,
    "K": 256,
    "N": 256,
    "dim": 64,
}
_SPATIAL = {1: ["length"], 2: ["height", "width"], 3: ["depth", "height", "width"]}


@dataclass
class _Param:
    name: str
    default: ast.expr | None
    annotation: str | None
    kw_only: bool = False


@dataclass
class _Input:
    expr: str
    todo: str | None = None
    names: set[str] = field(default_factory=set)  # the constants it uses


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001
        return "?"


def _literal(node: ast.expr | None) -> tuple[bool, object]:
    if node is None:
        return False, None
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


class _Analysis:
    """Everything the skeleton needs from the file and the class."""

    def __init__(
        self,
        stmts: list[ast.stmt],
        cls: ast.ClassDef | None,
        regex_init: list[str] | None,
        regex_forward: list[str] | None,
    ):
        self.aliases = import_aliases(stmts)
        self.classes = {n.name: n for n in _top_level(stmts) if isinstance(n, ast.ClassDef)}
        self.consts: dict[str, object] = {}
        self.taken: set[str] = set()
        self.functions: set[str] = set()
        for node in _top_level(stmts):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            self.taken.add(n.id)
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    ok, value = _literal(node.value)
                    if ok and isinstance(value, int | float | tuple | bool) and not isinstance(value, str):
                        self.consts[targets[0].id] = value
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.taken.add(node.name)
                if not isinstance(node, ast.ClassDef):
                    self.functions.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for a in node.names:
                    self.taken.add((a.asname or a.name).split(".")[0])
        self.init = self._method(cls, "__init__", set()) if cls is not None else None
        self.forward = self._method(cls, "forward", set()) if cls is not None else None
        #: bases the constructor may come from when the file shows no __init__ for the class
        self.foreign_init: list[str] = []
        if cls is not None and self.init is None:
            self.foreign_init = [
                _unparse(b)
                for b in cls.bases
                if not (isinstance(b, ast.Name) and b.id in self.classes)
                and torch_nn_class(_unparse(b), self.aliases) != "Module"
            ]
        if self.init is not None:
            self.params, self.kw_required = self._params(self.init)
        else:
            self.params = [_Param(n, None, None) for n in (regex_init or []) if not n.startswith("*")]
            self.kw_required = []
        if self.forward is not None:
            fparams, _ = self._params(self.forward)
            self.inputs = [p for p in fparams if p.default is None and not p.kw_only]
        else:
            self.inputs = [_Param(n, None, None) for n in (regex_forward or []) if not n.startswith("*")]
        self.param_names = {p.name for p in self.params}
        self.layers: dict[str, ast.Call] = {}
        self.self_alias: dict[str, ast.expr] = {}
        self.locals: dict[str, ast.expr] = {}
        self.layer_order: list[ast.Call] = []
        if self.init is not None:
            for assign in ast.walk(self.init):
                if isinstance(assign, ast.Assign | ast.AnnAssign) and assign.value is not None:
                    targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
                    for t in targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            self.self_alias.setdefault(t.attr, assign.value)
                            if isinstance(assign.value, ast.Call):
                                self.layers.setdefault(t.attr, assign.value)
                        elif isinstance(t, ast.Name) and t.id not in self.param_names:
                            self.locals.setdefault(t.id, assign.value)
            calls = [n for n in ast.walk(self.init) if isinstance(n, ast.Call)]
            self.layer_order = sorted(
                (c for c in calls if self.layer_kind(c) in _LAYER_ARGS), key=lambda c: (c.lineno, c.col_offset)
            )
        self.roles = self._roles()

    def _method(self, cls: ast.ClassDef, name: str, seen: set[str]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        for item in cls.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name:
                return item
        seen.add(cls.name)
        for b in cls.bases:
            if isinstance(b, ast.Name) and b.id in self.classes and b.id not in seen:
                found = self._method(self.classes[b.id], name, seen)
                if found is not None:
                    return found
        return None

    @staticmethod
    def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[_Param], list[str]]:
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        params = [
            _Param(p.arg, d, _unparse(p.annotation) if p.annotation else None)
            for p, d in zip(positional, defaults, strict=True)
        ][1:]
        kw_required = [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
        params += [
            _Param(p.arg, d, _unparse(p.annotation) if p.annotation else None, kw_only=True)
            for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
        ]
        return params, kw_required

    # -- names and sizes --------------------------------------------------------------------------

    def layer_kind(self, call: ast.Call) -> str | None:
        return torch_nn_class(_unparse(call.func), self.aliases)

    def param_of(self, expr: ast.expr, depth: int = 0) -> str | None:
        """The constructor parameter ``expr`` stands for (``x``, ``self.x`` set from x, a local alias)."""
        if depth > 8:
            return None
        if isinstance(expr, ast.Name):
            if expr.id in self.param_names:
                return expr.id
            if expr.id in self.locals:
                return self.param_of(self.locals[expr.id], depth + 1)
        elif (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"
            and expr.attr in self.self_alias
        ):
            return self.param_of(self.self_alias[expr.attr], depth + 1)
        return None

    def _roles(self) -> dict[str, tuple[str, str]]:
        """param -> (layer kind, argument name) of its first use as a layer argument; axis uses too."""
        roles: dict[str, tuple[str, str]] = {}
        for call in self.layer_order:
            kind = self.layer_kind(call) or ""
            names = _LAYER_ARGS.get(kind, ())
            pairs = list(zip(names, call.args, strict=False)) + [(k.arg, k.value) for k in call.keywords if k.arg]
            for arg_name, value in pairs:
                p = self.param_of(value)
                if p is not None:
                    roles.setdefault(p, (kind, arg_name))
        scopes = [n for n in (self.init, self.forward) if n is not None]
        for scope in scopes:
            for node in ast.walk(scope):
                if not isinstance(node, ast.Call):
                    continue
                for k in node.keywords:
                    if k.arg in ("dim", "axis") and (p := self.param_of(k.value)) is not None:
                        roles.setdefault(p, ("", "axis"))
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in _REDUCTIONS:
                    head = qualify(_unparse(func.value), self.aliases)
                    on_module = head in ("torch", "torch.nn.functional")
                    for a in node.args[1:] if on_module else node.args:
                        if (p := self.param_of(a)) is not None:
                            roles.setdefault(p, ("", "axis"))
        return roles

    def is_tuple_param(self, name: str) -> bool:
        p = next((q for q in self.params if q.name == name), None)
        if p is None:
            return False
        ok, value = _literal(p.default)
        if ok and isinstance(value, tuple | list):
            return True
        if name in self.consts and isinstance(self.consts[name], tuple):
            return True
        return bool(p.annotation and re.search(r"tuple|list|Sequence|Size|Iterable", p.annotation, re.I))


class _Namer:
    """Module-level constant names: reuse the file's literal constants, avoid every other bound name.

    Keys are (kind, wanted name): a size constant ("dim", "batch_size") and a constructor parameter of
    the same name ("param", "dim") never share a constant.
    """

    def __init__(self, a: _Analysis):
        self.a = a
        self.assigned: dict[tuple[str, str], str] = {}  # (kind, wanted name) -> name used

    def __call__(self, wanted: str, kind: str = "param") -> str:
        key = (kind, wanted)
        if key in self.assigned:
            return self.assigned[key]
        used = set(self.assigned.values())
        if wanted not in used and (wanted in self.a.consts or wanted not in self.a.taken):
            got = wanted
        else:
            got = next(
                c
                for c in (wanted.upper(), f"{wanted}_value", *(f"{wanted}_{i}" for i in range(2, 99)))
                if c not in self.a.taken and c not in used and c not in self.a.consts
            )
        self.assigned[key] = got
        return got


class _Skeleton:
    def __init__(self, a: _Analysis, class_name: str):
        self.a = a
        self.cls = class_name
        self.name = _Namer(a)
        self.shape_params: set[str] = set()
        self.param_forced_tuple: set[str] = set()

    # -- sizes ------------------------------------------------------------------------------------

    def size(self, expr: ast.expr | None, depth: int = 0) -> str | None:
        """Source of a size expression in module constants, or None."""
        if expr is None or depth > 8:
            return None
        a = self.a
        if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
            return repr(expr.value)
        if isinstance(expr, ast.Name):
            if expr.id in a.param_names:
                self.shape_params.add(expr.id)
                return self.name(expr.id)
            if expr.id in a.locals:
                return self.size(a.locals[expr.id], depth + 1)
            if isinstance(a.consts.get(expr.id), int | tuple):
                return expr.id
            return None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            return self.size(a.self_alias.get(expr.attr), depth + 1)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add | ast.Sub | ast.Mult | ast.FloorDiv):
            left, right = self.size(expr.left, depth + 1), self.size(expr.right, depth + 1)
            if left is None or right is None:
                return None
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}[type(expr.op)]
            return f"({left} {op} {right})"
        if isinstance(expr, ast.Tuple | ast.List):
            parts = [self.size(e, depth + 1) for e in expr.elts]
            if any(p is None for p in parts):
                return None
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
        return None

    def dim(self, name: str) -> str:
        return self.name(name, "dim")

    def randn(self, dims: list[str], todo: str | None = None) -> _Input:
        return _Input(f"torch.randn({', '.join(dims)})", todo)

    def layer_input(self, call: ast.Call, depth: int = 0) -> _Input | None:
        """The input a layer expects, or None when the layer does not say (or keeps the shape)."""
        a = self.a
        kind = a.layer_kind(call)
        if kind is None or depth > 4:
            return None
        if kind == "Sequential":
            for item in call.args:
                if not isinstance(item, ast.Call):
                    return None
                got = self.layer_input(item, depth + 1)
                if got is not None:
                    return got
                if a.layer_kind(item) not in _PRESERVING_LAYERS:
                    return None
            return None
        names = _LAYER_ARGS.get(kind)
        if names is None:
            return None
        args: dict[str, ast.expr] = dict(zip(names, call.args, strict=False))
        args.update({k.arg: k.value for k in call.keywords if k.arg})
        batch = self.dim("batch_size")
        todo = "set the real size (the layer's argument is not a constructor parameter or literal)"

        def size_or_placeholder(arg: str) -> tuple[str, str | None]:
            got = self.size(args.get(arg))
            return (got, None) if got is not None else (self.dim("dim"), todo)

        if kind in ("Linear", "Bilinear"):
            f, t = size_or_placeholder("in_features" if kind == "Linear" else "in1_features")
            return self.randn([batch, f], t)
        m = re.fullmatch(r"(?:Conv|ConvTranspose|BatchNorm|InstanceNorm)([123])d", kind)
        if m:
            d = int(m.group(1))
            c, t = size_or_placeholder("in_channels" if kind.startswith("Conv") else "num_features")
            spatial = [] if kind == "BatchNorm1d" else [self.dim(s) for s in _SPATIAL[d]]
            return self.randn([batch, c, *spatial], t)
        if kind == "GroupNorm":
            c, t = size_or_placeholder("num_channels")
            return self.randn([batch, c, self.dim("height"), self.dim("width")], t)
        if kind in ("LayerNorm", "RMSNorm"):
            expr = args.get("normalized_shape")
            p = a.param_of(expr) if expr is not None else None
            shape = self.size(expr)
            if shape is None:
                return self.randn([batch, self.dim("seq_len"), self.dim("dim")], todo)
            if isinstance(expr, ast.Tuple | ast.List) or (p is not None and a.is_tuple_param(p)):
                if p is not None:
                    self.param_forced_tuple.add(p)
                return self.randn([batch, "*" + shape])
            return self.randn([batch, self.dim("seq_len"), shape])
        if kind in ("Embedding", "EmbeddingBag"):
            n, t = size_or_placeholder("num_embeddings")
            return _Input(f"torch.randint(0, {n}, ({batch}, {self.dim('seq_len')}))", t)
        if kind in ("MultiheadAttention", "LSTM", "GRU", "RNN", "TransformerEncoderLayer", "TransformerDecoderLayer"):
            arg = {
                "MultiheadAttention": "embed_dim",
                "TransformerEncoderLayer": "d_model",
                "TransformerDecoderLayer": "d_model",
            }.get(kind, "input_size")
            e, t = size_or_placeholder(arg)
            return self.randn([batch, self.dim("seq_len"), e], t)
        return None

    # -- forward dataflow -------------------------------------------------------------------------

    def _is_call_preserving(self, call: ast.Call, same: set[str]) -> bool:
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            layer = self.a.layers.get(func.attr)
            return (
                layer is not None
                and self.a.layer_kind(layer) in _PRESERVING_LAYERS
                and bool(call.args)
                and self._same(call.args[0], same)
            )
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name not in _PRESERVING_CALLS:
            return False
        if isinstance(func, ast.Attribute):
            head = qualify(_unparse(func.value), self.a.aliases)
            if head in ("torch", "torch.nn.functional", "F"):
                return bool(call.args) and self._same(call.args[0], same)
            return self._same(func.value, same)  # x.relu()
        return bool(call.args) and self._same(call.args[0], same)

    def _same(self, expr: ast.expr, same: set[str]) -> bool:
        """Whether ``expr`` has the shape of the input being traced."""
        if isinstance(expr, ast.Name):
            return expr.id in same
        if isinstance(expr, ast.Call):
            return self._is_call_preserving(expr, same)
        if isinstance(expr, ast.UnaryOp):
            return self._same(expr.operand, same)
        if isinstance(expr, ast.BinOp) and not isinstance(expr.op, ast.MatMult):
            sides = [self._same(expr.left, same), self._same(expr.right, same)]
            others = [
                s
                for s, e in zip(sides, (expr.left, expr.right), strict=True)
                if not s and not isinstance(e, ast.Constant)
            ]
            return any(sides) and not others
        return False

    def _statements(self, body: list[ast.stmt]):
        for stmt in body:
            if isinstance(stmt, ast.If | ast.For | ast.While | ast.With | ast.AsyncFor | ast.AsyncWith):
                yield from self._statements(stmt.body)
                yield from self._statements(getattr(stmt, "orelse", []))
            elif isinstance(stmt, ast.Try | ast.TryStar):
                yield from self._statements(stmt.body)
                for h in stmt.handlers:
                    yield from self._statements(h.body)
            else:
                yield stmt

    def traced_input(self, param: str) -> _Input | None:
        fwd = self.a.forward
        if fwd is None:
            return None
        same = {param}
        for stmt in self._statements(fwd.body):
            calls = sorted(
                (n for n in ast.walk(stmt) if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset)
            )
            for call in calls:
                func = call.func
                if (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and func.value.id == "self"
                    and func.attr in self.a.layers
                    and call.args
                    and self._same(call.args[0], same)
                ):
                    got = self.layer_input(self.a.layers[func.attr])
                    if got is not None:
                        return got
            if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                keeps = (
                    self._same(stmt.value, same)
                    if not isinstance(stmt, ast.AugAssign)
                    else (
                        self._same(stmt.target, same)
                        and (self._same(stmt.value, same) or isinstance(stmt.value, ast.Constant))
                    )
                )
                for t in targets:
                    if isinstance(t, ast.Name):
                        (same.add if keeps else same.discard)(t.id)
        return None

    def matmul_inputs(self) -> dict[str, _Input]:
        fwd = self.a.forward
        out: dict[str, _Input] = {}
        if fwd is None:
            return out
        inputs = {p.name for p in self.a.inputs}
        for node in ast.walk(fwd):
            pair, batched = None, False
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                pair = (node.left, node.right)
            elif isinstance(node, ast.Call) and len(node.args) >= 2:
                q = qualify(_unparse(node.func), self.a.aliases)
                if q in ("torch.matmul", "torch.mm", "torch.bmm"):
                    pair, batched = (node.args[0], node.args[1]), q == "torch.bmm"
            if pair is None:
                continue
            left, right = pair
            if not (isinstance(left, ast.Name) and isinstance(right, ast.Name)) or not {left.id, right.id} <= inputs:
                continue
            lead = [self.dim("batch_size")] if batched else []
            m, k, n = self.dim("M"), self.dim("K"), self.dim("N")
            out.setdefault(left.id, self.randn([*lead, m, k]))
            out.setdefault(right.id, self.randn([*lead, k, n]))
        return out

    # -- values -----------------------------------------------------------------------------------

    def value_for(self, p: _Param) -> tuple[str, str | None]:
        """(source of the constant's value, TODO note or None) for constructor/forward parameter p."""
        ok, value = _literal(p.default)
        if ok and p.name in self.param_forced_tuple and isinstance(value, int):
            return repr((value,)), None
        if ok:
            return _unparse(p.default), None  # type: ignore[arg-type]
        if p.default is not None:
            names = {n.id for n in ast.walk(p.default) if isinstance(n, ast.Name)}
            if names <= self.a.taken | set(dir(builtins)):
                return _unparse(p.default), None
            return "None", "set a real value (the default is not a literal)"
        wants_tuple = p.name in self.param_forced_tuple or self.a.is_tuple_param(p.name)
        kind, role = self.a.roles.get(p.name, ("", ""))
        v: object
        if role:
            v = _POOL_ROLE_VALUES.get(role) if "Pool" in kind else None
            v = v if v is not None else _ROLE_VALUES.get(role)
            if v is not None or role in _ROLE_VALUES:
                return (repr((v,)) if wants_tuple and isinstance(v, int) else repr(v)), None
        ann = (p.annotation or "").strip()
        if ann == "bool":
            return "True", None
        if ann == "str":
            return '""', "set a real value"
        for pattern, v in _NAME_RULES:
            if pattern.search(p.name.lower()):
                if ann == "float" and isinstance(v, int) and not isinstance(v, bool):
                    v = float(v)
                return (repr((v,)) if wants_tuple and isinstance(v, int) else repr(v)), None
        if ann == "float":
            return "1.0", "set a real value"
        if wants_tuple:
            return "(64,)", "set the real shape"
        return "64", "set a real value"

    # -- assembly ---------------------------------------------------------------------------------

    def build(self, want_inputs: bool, want_init: bool) -> str:
        a = self.a
        inputs: list[tuple[_Param, _Input | str]] = []  # str: a scalar constant's name
        scalar_values: dict[str, tuple[str, str | None]] = {}
        if want_inputs:
            matmul = self.matmul_inputs()
            tensor_params = []
            for p in a.inputs:
                ann = (p.annotation or "").strip()
                if ann in ("int", "float", "bool"):
                    inputs.append((p, self.name(p.name)))
                    scalar_values[self.name(p.name)] = self.value_for(p)
                else:
                    tensor_params.append(p)
                    inputs.append((p, _Input("")))
            first: _Input | None = None
            for i, (p, inp) in enumerate(inputs):
                if isinstance(inp, str):
                    continue
                got = matmul.get(p.name) or self.traced_input(p.name)
                if got is None and first is None and a.layer_order:
                    got = self.layer_input(a.layer_order[0])
                    if got is not None:
                        got.todo = got.todo or "guessed from the first layer in __init__: check it"
                if got is None and first is not None:
                    got = _Input(first.expr, f"assumed to have the shape of {tensor_params[0].name}: check it")
                if got is None:
                    got = self.randn([self.dim("batch_size"), self.dim("dim")], "set the real shape")
                first = first or got
                inputs[i] = (p, got)
            if a.forward is None and not a.inputs:
                inputs.append(
                    (
                        _Param("x", None, None),
                        self.randn([self.dim("batch_size"), self.dim("dim")], "set the real shape and count"),
                    )
                )

        init_list: list[str] = []
        init_todo: list[str] = []
        param_values: dict[str, tuple[str, str | None]] = {}
        positional = [p for p in a.params if not p.kw_only]
        if want_init or want_inputs:
            needed = [i for i, p in enumerate(positional) if p.default is None or p.name in self.shape_params]
            upto = max(needed) + 1 if needed else 0
            for p in positional[:upto]:
                const = self.name(p.name)
                init_list.append(const)
                param_values[const] = self.value_for(p)
            if a.foreign_init:
                init_todo.append(f"the constructor comes from {', '.join(a.foreign_init)}: add its arguments")
            if a.kw_required:
                init_todo.append(
                    f"{self.cls}(*get_init_inputs()) cannot pass keyword-only argument(s) {', '.join(a.kw_required)}"
                )
        for p in positional:  # shape constants of parameters get_init_inputs does not pass
            shape_const = self.name(p.name) if p.name in self.shape_params else None
            if shape_const and shape_const not in param_values:
                param_values[shape_const] = self.value_for(p)

        out: list[str] = []
        funcs: list[str] = []
        used: set[str] = set()
        if want_inputs:
            items: list[tuple[str, str | None]] = []
            for _, inp in inputs:
                if isinstance(inp, str):
                    items.append((inp, None))
                    used.add(inp)
                else:
                    items.append((inp.expr, inp.todo))
                    used.update(re.findall(r"[A-Za-z_]\w*", inp.expr))
            funcs.append("def get_inputs():\n" + _return_list(items))
        if want_init:
            used.update(init_list)
            body = "".join(f"    # TODO: {t}\n" for t in init_todo)
            funcs.append("def get_init_inputs():\n" + body + _return_list([(c, None) for c in init_list]))

        out.append(f"# Example inputs for {self.cls} (generated by forge: check the sizes)")
        dims = sorted(
            ((k, v) for k, v in self.name.assigned.items() if k[0] == "dim"), key=lambda kv: list(_DIMS).index(kv[0][1])
        )
        for (_, wanted), const in dims:
            if const in used and const not in a.consts:
                out.append(f"{const} = {_DIMS[wanted]!r}")
        for const, (value, todo) in [*param_values.items(), *scalar_values.items()]:
            if const in used and const not in a.consts:
                out.append(f"{const} = {value}" + (f"  # TODO: {todo}" if todo else ""))
        return "\n".join(out) + "\n\n\n" + "\n\n\n".join(f.rstrip("\n") for f in funcs)


def _return_list(items: list[tuple[str, str | None]]) -> str:
    one_line = f"    return [{', '.join(expr for expr, _ in items)}]"
    if not any(t for _, t in items) and len(one_line) <= 100:
        return one_line + "\n"
    lines = ["    return ["]
    for expr, todo in items:
        lines.append(f"        {expr}," + (f"  # TODO: {todo}" if todo else ""))
    lines.append("    ]")
    return "\n".join(lines) + "\n"


@dataclass
class _Plan:
    lines: list[str]
    insert_line: int
    block: str  # constants and functions, no leading/trailing blank lines ("" when nothing is missing)
    needs_import: bool
    import_line: int


def _plan(file_text: str, class_name: str) -> _Plan:
    shift0 = 1 if file_text.startswith("\ufeff") else 0
    body_text = file_text[shift0:]
    lines = split_lines(file_text)
    stmts, _, broken = _parse_tolerant(body_text, split_lines(body_text))
    cls = next((n for n in _top_level(stmts) if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    regex_init = regex_forward = None
    if cls is not None:
        end = cls.end_lineno or cls.lineno
    else:
        found = None
        for start, stop in broken:
            classes, _, _ = _classes_from_broken_chunk(lines, start, stop)
            found = next((c for c in classes if c.name == class_name), None)
            if found:
                break
        if found is None:
            raise ValueError(f"no module-level class {class_name!r} in this file")
        end = found.end_line + 1
        regex_init, regex_forward = found.init, found.forward
    a = _Analysis(stmts, cls, regex_init, regex_forward)
    want_inputs = "get_inputs" not in a.functions
    want_init = "get_init_inputs" not in a.functions
    block = _Skeleton(a, class_name).build(want_inputs, want_init) if (want_inputs or want_init) else ""
    needs_import = want_inputs and a.aliases.get("torch") != "torch"
    after_header, import_line = 0, None
    for i, node in enumerate(stmts):
        if (
            i == 0
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            after_header = node.end_lineno or node.lineno  # the module docstring
        elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
            after_header = node.end_lineno or node.lineno
        elif isinstance(node, ast.Import | ast.ImportFrom):
            import_line = node.lineno - 1
            break
        else:
            break
    import_line = after_header if import_line is None else import_line
    return _Plan(lines, end, block, needs_import, import_line)


def _blank_lines_from(lines: list[str], i: int) -> tuple[int, bool]:
    """(blank lines starting at line i, whether anything non-blank follows them)."""
    k = 0
    while i + k < len(lines) and not lines[i + k].strip():
        k += 1
    return k, i + k < len(lines)


def _framed(block: str, plan: _Plan) -> str:
    """Two blank lines before the block and, when code follows, two after it."""
    blanks, more = _blank_lines_from(plan.lines, plan.insert_line)
    return "\n\n" + block.rstrip("\n") + "\n" + ("\n" * max(0, 2 - blanks) if more else "")


def inputs_skeleton(file_text: str, class_name: str) -> tuple[int, str]:
    """(0-based line, text): insert ``text`` at the start of that line to add the missing
    ``get_inputs()`` / ``get_init_inputs()`` for ``class_name``, right after the class.

    The block starts with ``import torch`` when the file does not import it (`skeleton_edits` puts
    that import at the top of the file instead). When the class ends the file and the file has no
    final newline, the line is one past the last line: append the text at the end of the file (it
    then starts with the missing line break; LSP clients clamp such a position to the end). The text is ``""`` when both functions already exist. Raises
    ValueError when the file has no module-level class of that name.
    """
    plan = _plan(file_text, class_name)
    if not plan.block:
        return plan.insert_line, ""
    block = ("import torch\n\n" if plan.needs_import else "") + plan.block
    past_end = "\n" if plan.insert_line >= len(plan.lines) else ""  # ends the file's last line first
    return plan.insert_line, past_end + _framed(block, plan)


def skeleton_edits(file_text: str, class_name: str) -> list[Insertion]:
    """The same fix as exact insertions for a versioned workspace edit: ``import torch`` next to the
    file's imports when missing, and the block after the class. Empty when nothing is missing."""
    plan = _plan(file_text, class_name)
    if not plan.block:
        return []
    edits = []
    if plan.needs_import:
        edits.append(Insertion(plan.import_line, 0, "import torch\n"))
    text = _framed(plan.block, plan)
    if plan.insert_line >= len(plan.lines):  # the class ends the file, which has no final newline
        last = len(plan.lines) - 1
        edits.append(Insertion(last, len(plan.lines[last]), "\n" + text))
    else:
        edits.append(Insertion(plan.insert_line, 0, text))
    return edits


def apply_insertions(text: str, insertions: list[Insertion] | tuple[int, str]) -> str:
    """``text`` with the insertions applied (also accepts `inputs_skeleton`'s (line, text))."""
    if isinstance(insertions, tuple):
        insertions = [Insertion(insertions[0], 0, insertions[1])]
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    out = text
    for ins in sorted(insertions, key=lambda i: (i.line, i.character), reverse=True):
        offset = len(text) if ins.line >= len(starts) else min(starts[ins.line] + ins.character, len(text))
        out = out[:offset] + ins.text + out[offset:]
    return out
