"""Which library kernels apply to a probed graph: pure Python over the probe's JSON.

Each `Match` is one rewrite step for the candidate's `_forge_install`: the nodes it replaces
(in graph order; only the last may have users outside the match), the `(op, target)` each must
still have when the candidate re-traces the model in the worker, the library function to call
and its arguments (``{"node": name}``, ``{"attr": "qualname"}`` or constants). Static facts
decide here (dims, shapes when the probe could propagate them, argument forms); the kernel
wrappers check the rest at run time and fall back to the torch op.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .probe import ProbeNode, ProbeReport

#: library op families, in the order candidates are offered
FAMILIES = ("softmax", "layer_norm", "rms_norm", "group_norm", "adaptive_avg_pool2d", "linear_act", "bias_act")

_ACTS = ("relu", "gelu", "silu")


class Match(BaseModel):
    family: str
    nodes: list[str]
    expect: list[list[str]]
    fn: str
    args: list[Any]
    ops: list[str]
    detail: str

    def step(self) -> dict[str, Any]:
        return {
            "replace": list(self.nodes),
            "expect": [list(e) for e in self.expect],
            "fn": self.fn,
            "args": list(self.args),
        }


# ----------------------------------------------------------------------------- helpers
class _Graph:
    def __init__(self, report: ProbeReport) -> None:
        self.nodes = report.nodes
        self.by_name = {n.name: n for n in report.nodes}
        self.order = {n.name: i for i, n in enumerate(report.nodes)}

    def get(self, spec: Any) -> ProbeNode | None:
        return self.by_name.get(spec["node"]) if _is_node(spec) else None


def _is_node(v: Any) -> bool:
    return isinstance(v, dict) and set(v) == {"node"}


def _is_const(v: Any) -> bool:
    if isinstance(v, list):
        return all(_is_const(x) for x in v)
    return v is None or isinstance(v, (bool, int, float, str))


def _bind(node: ProbeNode, names: list[str], ignore: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """Positional and keyword arguments by parameter name; None for forms we do not know."""
    if len(node.args) > len(names):
        return None
    bound = dict(zip(names, node.args, strict=False))
    for k, v in node.kwargs.items():
        if k in ignore:
            continue
        if k not in names or k in bound:
            return None
        bound[k] = v
    return bound


def _expect(node: ProbeNode) -> list[str]:
    return [node.op, node.target]


def _int_list(v: Any) -> list[int] | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return [v]
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return list(v)
    return None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _single_user(g: _Graph, node: ProbeNode, user: str) -> bool:
    return node.users == [user]


def _param_spec(g: _Graph, v: Any) -> tuple[bool, Any]:
    """(ok, spec) for an optional tensor argument: None or a traced node."""
    if v is None:
        return True, None
    if _is_node(v) and v["node"] in g.by_name:
        return True, v
    return False, None


def _module_param(node: ProbeNode, name: str) -> dict[str, str] | None:
    return {"attr": f"{node.target}.{name}"} if node.module and name in node.module.get("params", {}) else None


def _input_shape(g: _Graph, spec: Any) -> list[int] | None:
    n = g.get(spec)
    return n.shape if n is not None else None


# ----------------------------------------------------------------------------- per op
def _softmax(g: _Graph, n: ProbeNode) -> Match | None:
    if n.op == "call_module":
        x, dim = (n.args[0] if n.args else None), (n.module or {}).get("attrs", {}).get("dim")
        if len(n.args) != 1 or n.kwargs:
            return None
    else:
        b = _bind(n, ["input", "dim"], ignore=("_stacklevel", "dtype"))
        if b is None or n.kwargs.get("dtype") is not None:
            return None
        x, dim = b.get("input"), b.get("dim")
    if not _is_node(x) or not isinstance(dim, int) or isinstance(dim, bool):
        return None
    shape = _input_shape(g, x)
    if dim != -1 and not (shape is not None and dim == len(shape) - 1):
        return None
    return Match(
        family="softmax",
        nodes=[n.name],
        expect=[_expect(n)],
        fn="forge_softmax",
        args=[x, dim],
        ops=["softmax"],
        detail=f"{n.name}: softmax over the last dim",
    )


def _norm_shape(v: Any) -> list[int] | None:
    return _int_list(v)


def _layer_norm(g: _Graph, n: ProbeNode) -> Match | None:
    if n.op == "call_module":
        a = (n.module or {}).get("attrs", {})
        if len(n.args) != 1 or n.kwargs:
            return None
        x, shape, eps = n.args[0], _norm_shape(a.get("normalized_shape")), _num(a.get("eps"))
        affine = bool(a.get("elementwise_affine"))
        w = _module_param(n, "weight") if affine else None
        bias = _module_param(n, "bias") if affine else None
        what = "nn.LayerNorm"
    else:
        b = _bind(n, ["input", "normalized_shape", "weight", "bias", "eps", "cudnn_enable"])
        if b is None:
            return None
        x, shape, eps = b.get("input"), _norm_shape(b.get("normalized_shape")), _num(b.get("eps", 1e-5))
        ok_w, w = _param_spec(g, b.get("weight"))
        ok_b, bias = _param_spec(g, b.get("bias"))
        if not (ok_w and ok_b):
            return None
        what = "layer_norm"
    if not _is_node(x) or shape is None or eps is None:
        return None
    xs = _input_shape(g, x)
    if xs is not None and xs[len(xs) - len(shape) :] != shape:
        return None
    affine_parts = ", ".join(name for name, spec in (("weight", w), ("bias", bias)) if spec) or "no affine"
    return Match(
        family="layer_norm",
        nodes=[n.name],
        expect=[_expect(n)],
        fn="forge_layer_norm",
        args=[x, shape, w, bias, eps],
        ops=["layer_norm"],
        detail=f"{n.name}: {what} over {tuple(shape)} ({affine_parts})",
    )


def _rms_norm(g: _Graph, n: ProbeNode) -> Match | None:
    if n.op == "call_module":
        a = (n.module or {}).get("attrs", {})
        if len(n.args) != 1 or n.kwargs:
            return None
        x, shape, eps = n.args[0], _norm_shape(a.get("normalized_shape")), a.get("eps")
        w = _module_param(n, "weight") if a.get("elementwise_affine") else None
        what = "nn.RMSNorm"
    else:
        b = _bind(n, ["input", "normalized_shape", "weight", "eps"])
        if b is None:
            return None
        x, shape, eps = b.get("input"), _norm_shape(b.get("normalized_shape")), b.get("eps")
        ok_w, w = _param_spec(g, b.get("weight"))
        if not ok_w:
            return None
        what = "rms_norm"
    if not _is_node(x) or shape is None or (eps is not None and _num(eps) is None):
        return None
    xs = _input_shape(g, x)
    if xs is not None and xs[len(xs) - len(shape) :] != shape:
        return None
    return Match(
        family="rms_norm",
        nodes=[n.name],
        expect=[_expect(n)],
        fn="forge_rms_norm",
        args=[x, shape, w, _num(eps) if eps is not None else None],
        ops=["rms_norm"],
        detail=f"{n.name}: {what} over {tuple(shape)}" + (" with weight" if w else ""),
    )


def _explicit_rms_norm(g: _Graph, r: ProbeNode) -> Match | None:
    """x * rsqrt(mean(x^2, -1, keepdim=True) + eps) [* weight], intermediates used only here."""
    if r.kind != "rsqrt" or len(r.args) != 1 or r.kwargs:
        return None
    add = g.get(r.args[0])
    if add is None or add.kind != "add" or add.kwargs or len(add.args) != 2 or add.users != [r.name]:
        return None
    mean_spec, eps = (add.args[0], add.args[1]) if _is_node(add.args[0]) else (add.args[1], add.args[0])
    mean = g.get(mean_spec)
    if mean is None or mean.kind != "mean" or _num(eps) is None or mean.users != [add.name]:
        return None
    b = _bind(mean, ["input", "dim", "keepdim"])
    if b is None or b.get("keepdim") is not True:
        return None
    sq = g.get(b.get("input"))
    if sq is None or sq.users != [mean.name] or sq.kwargs or len(sq.args) != 2:
        return None
    if sq.kind == "pow" and _is_node(sq.args[0]) and sq.args[1] == 2 and not isinstance(sq.args[1], bool):
        x = sq.args[0]
    elif sq.kind == "mul" and _is_node(sq.args[0]) and sq.args[0] == sq.args[1]:
        x = sq.args[0]
    else:
        return None
    xs = _input_shape(g, x)
    dims = _int_list(b.get("dim"))
    if dims is None or len(dims) != 1 or not (dims[0] == -1 or (xs is not None and dims[0] == len(xs) - 1)):
        return None
    if len(r.users) != 1:
        return None
    m1 = g.by_name[r.users[0]]
    if (
        m1.kind != "mul"
        or m1.kwargs
        or len(m1.args) != 2
        or {str(a) for a in m1.args} != {str(x), str({"node": r.name})}
    ):
        return None
    nodes = [sq, mean, add, r, m1]
    weight = None
    if len(m1.users) == 1:
        m2 = g.by_name[m1.users[0]]
        other = [a for a in m2.args if a != {"node": m1.name}] if m2.kind == "mul" and len(m2.args) == 2 else []
        w = g.get(other[0]) if len(other) == 1 and not m2.kwargs else None
        if w is not None and w.op == "get_attr" and w.attr and len(w.attr.get("shape", [])) == 1:
            if xs is None or w.attr["shape"][0] == xs[-1]:
                nodes.append(m2)
                weight = other[0]
    if weight is not None:
        d = (g.by_name[weight["node"]].attr or {})["shape"][0]
    elif xs is not None:
        d = xs[-1]
    else:
        return None
    nodes.sort(key=lambda nd: g.order[nd.name])
    return Match(
        family="rms_norm",
        nodes=[nd.name for nd in nodes],
        expect=[_expect(nd) for nd in nodes],
        fn="forge_rms_norm",
        args=[x, [d], weight, _num(eps)],
        ops=["rms_norm"],
        detail=f"{nodes[-1].name}: x * rsqrt(mean(x^2) + eps)" + (" * weight" if weight else "") + " (RMS norm)",
    )


def _group_norm(g: _Graph, n: ProbeNode) -> Match | None:
    if n.op == "call_module":
        a = (n.module or {}).get("attrs", {})
        if len(n.args) != 1 or n.kwargs:
            return None
        x, groups, eps = n.args[0], a.get("num_groups"), _num(a.get("eps"))
        affine = bool(a.get("affine"))
        w = _module_param(n, "weight") if affine else None
        bias = _module_param(n, "bias") if affine else None
        what = "nn.GroupNorm"
    else:
        b = _bind(n, ["input", "num_groups", "weight", "bias", "eps", "cudnn_enabled"])
        if b is None:
            return None
        x, groups, eps = b.get("input"), b.get("num_groups"), _num(b.get("eps", 1e-5))
        ok_w, w = _param_spec(g, b.get("weight"))
        ok_b, bias = _param_spec(g, b.get("bias"))
        if not (ok_w and ok_b):
            return None
        what = "group_norm"
    if not _is_node(x) or not isinstance(groups, int) or isinstance(groups, bool) or groups <= 0 or eps is None:
        return None
    xs = _input_shape(g, x)
    if xs is not None and (len(xs) < 2 or xs[1] % groups != 0):
        return None
    return Match(
        family="group_norm",
        nodes=[n.name],
        expect=[_expect(n)],
        fn="forge_group_norm",
        args=[x, groups, w, bias, eps],
        ops=["group_norm"],
        detail=f"{n.name}: {what} with {groups} groups" + (" (affine)" if w or bias else ""),
    )


def _adaptive_avg_pool2d(g: _Graph, n: ProbeNode) -> Match | None:
    if n.op == "call_module":
        if len(n.args) != 1 or n.kwargs:
            return None
        x, size = n.args[0], (n.module or {}).get("attrs", {}).get("output_size")
    else:
        b = _bind(n, ["input", "output_size"])
        if b is None:
            return None
        x, size = b.get("input"), b.get("output_size")
    size = _int_list(size)
    if size is not None and len(size) == 1:
        size = size * 2
    if not _is_node(x) or size is None or len(size) != 2 or min(size) <= 0:
        return None
    xs = _input_shape(g, x)
    if xs is not None and len(xs) not in (3, 4):
        return None
    return Match(
        family="adaptive_avg_pool2d",
        nodes=[n.name],
        expect=[_expect(n)],
        fn="forge_adaptive_avg_pool2d",
        args=[x, size],
        ops=["adaptive_avg_pool2d"],
        detail=f"{n.name}: adaptive_avg_pool2d to {tuple(size)}",
    )


def _activation(n: ProbeNode) -> tuple[Any, str] | None:
    """(input spec, act name) of a relu/gelu/silu node."""
    if n.kind not in _ACTS:
        return None
    if n.op == "call_module":
        if len(n.args) != 1 or n.kwargs:
            return None
        x, approx = n.args[0], (n.module or {}).get("attrs", {}).get("approximate", "none")
    else:
        names = ["input", "approximate"] if n.kind == "gelu" else ["input", "inplace"]
        b = _bind(n, names)
        if b is None:
            return None
        x, approx = b.get("input"), b.get("approximate", "none")
    if n.kind == "gelu":
        if approx not in ("none", "tanh"):
            return None
        return x, "gelu" if approx == "none" else "gelu_tanh"
    return x, n.kind


def _epilogue(g: _Graph, act: ProbeNode) -> Match | None:
    a = _activation(act)
    if a is None:
        return None
    x, act_name = a
    p = g.get(x)
    if p is None or p.users != [act.name]:
        return None
    if p.kind == "linear":
        if p.op == "call_module":
            if len(p.args) != 1 or p.kwargs:
                return None
            inp, w, bias = p.args[0], _module_param(p, "weight"), _module_param(p, "bias")
            if w is None:
                return None
        else:
            b = _bind(p, ["input", "weight", "bias"])
            if b is None or not _is_node(b.get("weight")):
                return None
            inp, w = b.get("input"), b.get("weight")
            ok_b, bias = _param_spec(g, b.get("bias"))
            if not ok_b:
                return None
        if not _is_node(inp):
            return None
        return Match(
            family="linear_act",
            nodes=[p.name, act.name],
            expect=[_expect(p), _expect(act)],
            fn="forge_linear_act",
            args=[inp, w, bias, act_name],
            ops=["linear", act.kind or act_name],
            detail=f"{p.name} -> {act.name}: linear" + (" + bias" if bias else "") + f" + {act_name}",
        )
    if p.kind == "add":
        b = _bind(p, ["input", "other", "alpha"])
        if b is None or b.get("alpha", 1) != 1 or not (_is_node(b.get("input")) and _is_node(b.get("other"))):
            return None
        first, second = g.get(b["input"]), g.get(b["other"])
        if first is None or second is None:
            return None
        if second.op == "get_attr" and first.op != "get_attr":
            data, bias_node = first, second
        elif first.op == "get_attr" and second.op != "get_attr":
            data, bias_node = second, first
        else:
            return None
        if not bias_node.attr or bias_node.attr.get("kind") not in ("parameter", "buffer"):
            return None
        if data.dtype is not None and bias_node.attr.get("dtype") != data.dtype:
            return None
        if data.shape is not None:
            if p.shape is not None and p.shape != data.shape:
                return None  # the bias would broadcast the data to a bigger shape
            if _bias_layout(data.shape, bias_node.attr["shape"]) is None:
                return None
        return Match(
            family="bias_act",
            nodes=[p.name, act.name],
            expect=[_expect(p), _expect(act)],
            fn="forge_bias_act",
            args=[{"node": data.name}, {"node": bias_node.name}, act_name],
            ops=["add", act.kind or act_name],
            detail=f"{p.name} -> {act.name}: + {bias_node.target} {tuple(bias_node.attr['shape'])} + {act_name}",
        )
    return None


def _bias_layout(shape: list[int], bias_shape: list[int]) -> str | None:
    """Mirror of the kernel's `_forge_bias_layout`: 'last' or 'channel', or None."""
    if len(bias_shape) > len(shape):
        return None
    padded = [1] * (len(shape) - len(bias_shape)) + list(bias_shape)
    dims = [i for i, s in enumerate(padded) if s != 1]
    if len(dims) != 1 or padded[dims[0]] != shape[dims[0]]:
        return None
    return "last" if dims[0] == len(shape) - 1 else "channel"


_SINGLE = {
    "softmax": _softmax,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "group_norm": _group_norm,
    "adaptive_avg_pool2d": _adaptive_avg_pool2d,
}


def match_graph(report: ProbeReport) -> list[Match]:
    """Every library rewrite that applies, in graph order (they may overlap; see `disjoint`)."""
    if not report.traced:
        return []
    g = _Graph(report)
    found: list[Match] = []
    for n in report.nodes:
        m: Match | None = None
        if n.kind in _SINGLE and n.op in ("call_function", "call_method", "call_module"):
            m = _SINGLE[n.kind](g, n)
        elif n.kind == "rsqrt":
            m = _explicit_rms_norm(g, n)
        elif n.kind in _ACTS:
            m = _epilogue(g, n)
        if m is not None and all(
            _is_const(a) or _is_node(a) or (isinstance(a, dict) and set(a) == {"attr"}) for a in m.args
        ):
            found.append(m)
    return found


def disjoint(matches: list[Match]) -> list[Match]:
    """Matches that can be applied together: no node replaced twice (earlier wins)."""
    taken: set[str] = set()
    out = []
    for m in matches:
        if taken.isdisjoint(m.nodes):
            out.append(m)
            taken.update(m.nodes)
    return out
