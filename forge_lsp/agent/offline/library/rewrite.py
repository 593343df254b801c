# ---- forge offline library: FX rewrite of the reference forward -----------------------------
import torch
import torch.fx


def _forge_target_name(node):
    """The name the offline probe recorded for a node's target (the same rule on both sides)."""
    if node.op == "call_function":
        return getattr(node.target, "__name__", repr(node.target))
    return str(node.target)


def _forge_install(module, plan, scope):
    """Trace the reference forward of `module` and rewrite the planned nodes into library calls.

    Returns the generated forward as a plain function of (self, *inputs). It is meant to be
    called with the live module as `self`, so parameters, buffers and submodules are read at
    call time: `.to()`, `load_state_dict` and the state_dict keys stay exactly the reference's
    (the GraphModule only generates the code; it is not kept as a submodule).
    `plan`: list of steps {"replace": [node names], "expect": [[op, target]], "fn": name in
    `scope`, "args": [spec]}; spec {"node": name} is a traced node, {"attr": "a.b"} a new
    get_attr node, anything else a constant.
    """
    tracer = torch.fx.Tracer()
    tracer.traced_func_name = "_forge_reference_forward"
    graph = tracer.trace(module)
    nodes = {n.name: n for n in graph.nodes}
    for step in plan:
        old = []
        for name, (op, target) in zip(step["replace"], step["expect"], strict=True):
            node = nodes.get(name)
            if node is None or node.op != op or _forge_target_name(node) != target:
                found = "nothing" if node is None else f"{node.op} {_forge_target_name(node)}"
                raise RuntimeError(
                    f"forge offline library: the traced graph differs from the probed one: "
                    f"expected {op} {target} at node {name!r}, found {found}"
                )
            old.append(node)

        def arg(spec):
            if isinstance(spec, dict) and "node" in spec:
                return nodes[spec["node"]]
            if isinstance(spec, dict) and "attr" in spec:
                return graph.get_attr(spec["attr"])
            return spec

        with graph.inserting_before(old[-1]):
            new = graph.call_function(scope[step["fn"]], tuple(arg(s) for s in step["args"]))
        old[-1].replace_all_uses_with(new)
        for node in reversed(old):
            if node.users:
                raise RuntimeError(f"forge offline library: node {node.name!r} is still used after the rewrite")
            graph.erase_node(node)
            del nodes[node.name]
        nodes[step["replace"][-1]] = new  # later steps that read the replaced value read the new node
    graph.lint()
    return type(torch.fx.GraphModule(module, graph)).forward
