"""Output comparison: every output, exact metadata, per-dtype tolerances, NaN/Inf positions."""

import pytest
import torch

from forge_lsp.engine.harness.compare import compare_outputs
from forge_lsp.engine.task import DEFAULT_TOLERANCES, Tolerance


def tol(dtype: str):
    return DEFAULT_TOLERANCES.get(dtype.removeprefix("torch."))


def cmp(expected, actual):
    return compare_outputs(expected, actual, tol, "set")[0]


def test_equal_tensors_match():
    x = torch.randn(32, 32)
    assert cmp(x, x.clone()) is None


def test_fp32_error_beyond_tolerance_is_reported_with_location():
    x = torch.randn(8, 8)
    y = x.clone()
    y[3, 5] += 1e-2
    m = cmp(x, y)
    assert m.problem == "values" and m.index == [3, 5]
    assert m.max_abs_error == pytest.approx(1e-2, rel=1e-3)


def test_fp32_rounding_noise_passes():
    x = torch.randn(1000)
    assert cmp(x, x * (1 + 1e-6)) is None


def test_atol_scales_with_output_magnitude():
    x = torch.randn(1000, dtype=torch.float32) * 1e4  # e.g. a long reduction
    assert cmp(x, x + 0.5) is None  # 0.5 abs on rms 1e4 is fp32 rounding territory
    assert cmp(x, x + 50.0) is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("size", [1e-2, 1e-3, 1e-5])
def test_a_small_output_off_by_a_few_percent_everywhere_fails_though_each_element_is_within_atol(dtype, size):
    """atol is absolute below an output of rms 1: alone, it would accept a 3% approximation of an output of rms
    1e-3 (3e-5 per element against atol 1e-4). The error as a whole, relative to the output, must stay small."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(256, 64, generator=g) * size).to(dtype)
    off = (x.double() * (1 + 0.03 * torch.randn(256, 64, generator=g, dtype=torch.float64).sign())).to(dtype)
    m = cmp(x, off)
    assert m is not None and m.problem == "values"
    assert "relative rms error" in m.detail or m.bad_fraction > 0
    assert cmp(x, x.clone()) is None


def test_a_small_outputs_honest_rounding_and_cancellation_pass():
    """A float32 softmax of 256-wide rows (rms 4e-3) summed in another order, and an output of rms 1 that is the
    difference of values of size 1000 (rounded in float32 before the subtraction): honest errors, accepted."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 256, generator=g)
    ref = torch.softmax(x.double(), -1).float()
    ex = torch.exp(x - x.max(-1, keepdim=True).values)
    assert cmp(ref, ex / ex.sum(-1, keepdim=True)) is None
    big = torch.randn(512, 256, generator=g, dtype=torch.float64) * 1000
    exact = ((big - big.mean(-1, keepdim=True)) * 1e-3).float()
    rounded = big.float()
    assert cmp(exact, (rounded - rounded.mean(-1, keepdim=True)) * 1e-3) is None


def test_an_all_zero_output_is_judged_element_by_element():
    z = torch.zeros(100)
    assert cmp(z, z + 1e-6) is None  # within atol; nothing to be relative to
    assert cmp(z, z + 1e-3) is not None


def test_bf16_uses_loose_tolerance_fp32_strict():
    x = torch.randn(100)
    assert cmp(x.bfloat16(), (x * 1.005).bfloat16()) is None
    assert cmp(x, x * 1.005) is not None


def test_dtype_shape_device_must_match_exactly():
    x = torch.randn(4, 4)
    assert cmp(x, x.double()).problem == "dtype"
    assert cmp(x, x.reshape(16)).problem == "shape"
    assert cmp(x, x.to("meta")).problem == "device"


def test_stride_agnostic():
    x = torch.randn(6, 9)
    y = x.t().contiguous().t()  # same values, column-major strides
    assert y.stride() != x.stride()
    assert cmp(x, y) is None


def test_nan_positions_must_match_and_never_pass_alone():
    x = torch.randn(10)
    y = x.clone()
    y[4] = float("nan")
    assert cmp(x, y).problem == "nan"
    both = x.clone()
    both[4] = float("nan")
    assert cmp(both, both.clone()) is None  # NaN where the reference has NaN is fine
    all_nan = torch.full((5,), float("nan"))
    assert cmp(all_nan, all_nan.clone()).problem == "nan"  # nothing to verify is not a pass


def test_inf_positions_and_signs():
    x = torch.tensor([1.0, float("inf"), -float("inf")])
    assert cmp(x, x.clone()) is None
    assert cmp(x, torch.tensor([1.0, -float("inf"), -float("inf")])).problem == "inf"


def test_every_output_of_a_tuple_is_compared():
    a, b = torch.randn(3), torch.randn(3)
    m = cmp((a, b), (a.clone(), torch.zeros(3)))
    assert m is not None and m.output == "out[1]"


def test_dict_outputs_and_structure():
    a = {"h": torch.randn(3), "c": torch.randn(2)}
    assert cmp(a, {k: v.clone() for k, v in a.items()}) is None
    assert cmp(a, {"h": a["h"].clone()}).problem == "structure"
    m = cmp(a, {"h": a["h"].clone(), "c": a["c"] + 1})
    assert m.output == "out['c']"


def test_integer_outputs_exact():
    x = torch.arange(10)
    y = x.clone()
    y[7] += 1
    assert cmp(x, y).problem == "values"


def test_list_and_tuple_interchangeable_but_lengths_not():
    a = torch.randn(2)
    assert cmp((a, a), [a.clone(), a.clone()]) is None
    assert cmp((a, a), (a.clone(),)).problem == "structure"


@pytest.mark.integration
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_fused_check_and_exact_check_agree(dtype):
    """The one-sync check that decides the common case passes exactly what the float64 examination passes:
    random outputs with small and large errors, NaN and ±Inf in either tensor, near the tolerance edge."""
    from forge_lsp.engine.harness.compare import _agrees, _float_mismatch

    gen = torch.Generator().manual_seed(7)
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    outcomes = set()
    for trial in range(300):
        e = (torch.randn(257, generator=gen) * 10 ** (trial % 7 - 3)).to(dtype)
        a = e.clone()
        kind = trial % 6
        idx = int(torch.randint(0, 257, (1,), generator=gen))
        if kind == 1:  # error around the tolerance's edge
            scale = max(1.0, float(e.double().square().mean().sqrt()))
            a[idx] = (
                e[idx].double() + (tol.atol * scale + tol.rtol * abs(float(e[idx]))) * (0.5 + trial % 3 * 0.5)
            ).to(dtype)
        elif kind == 2:
            a[idx] = float("nan")
        elif kind == 3:
            e[idx] = a[idx] = float("inf") if trial % 2 else float("-inf")
            if trial % 4 == 3:
                a[idx] = -a[idx]
        elif kind == 4:
            e[idx] = a[idx] = float("nan")
        elif kind == 5:
            a[idx] = float("inf")
        fused, _ = _agrees(e, a, tol)
        exact = _float_mismatch(e, a, tol, e, lambda *args, **kw: (args, kw)) is None
        assert fused == exact, (trial, kind, e[idx], a[idx])
        outcomes.add(fused)
    assert outcomes == {True, False}


def test_nudged_timed_inputs_keep_the_sum_bit_for_bit_and_reach_both_models_alike():
    """Every nudged call repeats the previous contents with a few elements swapped, drawn so that `x.sum()` is
    the same float: a cache keyed on the sum (or a few samples, or the pointer) hits and serves a stale answer."""
    from forge_lsp.engine.harness.probes import InputRefresher

    x = torch.randn(16, 100, generator=torch.Generator().manual_seed(11)) * 3
    ref_in, cand_in = [x.clone()], [x.clone()]
    refresher = InputRefresher([ref_in, cand_in], pool=[[x]], permutable=[True], seed=5)
    nudged = 0
    for call in range(200):
        before = ref_in[0].clone()
        refresher.refresh(call)
        assert torch.equal(ref_in[0], cand_in[0])
        if refresher.nudges(call):
            nudged += 1
            assert float(ref_in[0].sum()) == float(before.sum())
            assert not torch.equal(ref_in[0], before)  # the contents did change
            assert torch.equal(ref_in[0].sort(dim=1).values, before.sort(dim=1).values)  # by swaps within rows
        else:
            assert not torch.equal(ref_in[0], before)
            # a pool set, rotated: the same values as the task drew, in another order
            assert torch.equal(ref_in[0].reshape(-1).sort().values, x.reshape(-1).sort().values)
    assert nudged == 50


def test_structured_timed_inputs_are_new_draws_never_transformed():
    """An input whose structure the task's code ties together (here a triangular matrix) gets only contents the
    task drew: new draws while there are any, else the pool's sets exactly as drawn; it is never nudged."""
    from forge_lsp.engine.harness.probes import InputRefresher

    sets = [[torch.triu(torch.randn(8, 8, generator=torch.Generator().manual_seed(i)))] for i in range(3)]
    target = [sets[0][0].clone()]
    drawn = InputRefresher([target], draw=lambda call: sets[call % 3], permutable=[False], seed=1)
    pooled = InputRefresher([[sets[0][0].clone()]], pool=sets, permutable=[False], seed=1)
    for call in range(40):
        for refresher in (drawn, pooled):
            refresher.refresh(call)
            now = refresher.targets[0][0]
            assert not refresher.nudges(call)
            assert any(torch.equal(now, s[0]) for s in sets), call
            assert torch.equal(now, now.triu())
    assert drawn.drawn == 40 and pooled.reused == 40


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_comparison_in_bounded_chunks_finds_the_same_element(monkeypatch, layout):
    """Compared a chunk at a time (here 7 elements), whatever the layout: the verdict, the worst element's index and
    the counts are those of the whole tensor compared at once."""
    from forge_lsp.engine.harness import compare as C

    gen = torch.Generator().manual_seed(3)
    e = torch.randn(13, 5, generator=gen)  # 5-element rows: a non-contiguous one goes a row at a time
    a = e.clone()
    a[9, 4] += 0.5  # the worst
    a[2, 3] += 0.01
    a[5, 1] = float("nan") if layout == "transposed" else a[5, 1]
    if layout == "transposed":
        e, a = e.t().contiguous().t(), a.t().contiguous().t()
        assert not e.is_contiguous()
    tol = Tolerance(atol=1e-4, rtol=1e-4)
    whole, _ = C.check_tensor(e, a, tol, "set", "out")
    monkeypatch.setattr(C, "CHUNK", 7)
    chunked, _ = C.check_tensor(e, a, tol, "set", "out")
    assert whole is not None and chunked is not None and chunked.model_dump_json() == whole.model_dump_json()
    if layout == "transposed":
        assert chunked.problem == "nan" and chunked.index == [5, 1]
    else:
        assert chunked.problem == "values" and chunked.index == [9, 4] and "2 of 65" in chunked.detail
    assert C.check_tensor(e, e.clone(), tol, "set", "out")[0] is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rms", [1e-3, 1.0, 30.0])
def test_honest_rounding_is_decided_by_the_single_precision_check_alone(dtype, rms):
    """The common case (an honest output: the same values computed another way) never needs the float64 pass, at an
    output's rms below 1, at about 1 (a normalisation's output) and above: `_agrees_fast` says yes by itself."""
    from forge_lsp.engine.harness.compare import _agrees_fast

    g = torch.Generator().manual_seed(3)
    x = torch.randn(300, 200, generator=g, dtype=torch.float64)
    exact = ((x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True) * rms).to(dtype)
    approx = (x.to(dtype).float() - x.to(dtype).float().mean(-1, keepdim=True)) / x.float().std(-1, keepdim=True)
    approx = (approx * rms).to(dtype)
    fast = _agrees_fast(exact, approx, tol(str(dtype)))
    assert fast is not None and fast[0] is True
    assert fast[1] == pytest.approx(float((approx.double() - exact.double()).abs().max()), rel=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_single_precision_check_never_accepts_what_float64_rejects(dtype):
    """One element's error placed within a few parts in 10^7 either side of the tolerance's edge (the tolerance set
    from the error, its atol part or its rtol part), and small outputs off as a whole near their bound: wherever
    `_agrees_fast` says yes, the float64 examination finds nothing; near an edge it hands the decision on (None)
    rather than guess, and the two together decide as float64 alone does."""
    from forge_lsp.engine.harness.compare import _agrees, _agrees_fast, _float_mismatch, small_output_bound

    g = torch.Generator().manual_seed(11)
    said = {True: 0, None: 0}
    for trial in range(240):
        t = tol(str(dtype))
        if trial % 3 < 2:  # one element at the edge
            e = (torch.randn(4096, generator=g, dtype=torch.float64) * [0.5, 0.9999][trial % 2]).to(dtype)
            a = e.clone()
            i = int(torch.randint(0, 4096, (1,), generator=g))
            a[i] = float(e[i]) + 0.05
            err = abs(float(a[i]) - float(e[i]))
            inside = 1 + [-1e-5, -3e-6, -1e-6, -1e-7, 1e-7, 1e-6, 3e-6, 2e-5][trial % 8]  # > 1: just outside
            if trial % 4 < 2:
                t = Tolerance(atol=err / inside, rtol=0.0)
            else:
                t = Tolerance(atol=1e-19, rtol=err / inside / abs(float(e[i])))
        else:  # the whole output off by about its small-output bound
            e = (torch.randn(4096, generator=g, dtype=torch.float64) * 1e-3).to(dtype)
            off = small_output_bound(t) * (0.85 + 0.05 * (trial % 5))
            a = (e.double() * (1 + off * torch.randn(4096, generator=g, dtype=torch.float64).sign())).to(dtype)
        fast = _agrees_fast(e, a, t)
        exact = _float_mismatch(e, a, t, e, lambda *args, **kw: (args, kw)) is None
        assert fast is None or (fast[0] and exact), (trial, t)
        assert _agrees(e, a, t)[0] == exact
        said[None if fast is None else True] += 1
    assert said[True] and said[None]  # both answers were exercised


def test_the_output_digest_sees_one_changed_bit_and_a_swap_in_every_type():
    """`bits_digest`, the fingerprint that tells whether a held output was overwritten later: equal for a copy, changed
    by one flipped bit anywhere and by two elements swapped, for floats, integers, bools and complex, across chunks."""
    from forge_lsp.engine.harness import compare
    from forge_lsp.engine.harness.checks import bits_digest

    g = torch.Generator().manual_seed(5)
    for dtype in [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int8,
        torch.uint8,
        torch.int32,
        torch.int64,
        torch.bool,
        torch.complex64,
    ]:
        x = (torch.randn(compare.CHUNK + 1000, generator=g) * 100).to(dtype)
        assert bits_digest(x) == bits_digest(x.clone())
        for at in (0, 777, compare.CHUNK - 1, compare.CHUNK + 999):
            flipped = x.clone()
            raw = flipped.view(torch.uint8).view(-1)
            byte = at * x.element_size()
            raw[byte] ^= 1  # the lowest bit of the element's first byte
            assert bits_digest(flipped) != bits_digest(x), (dtype, at)
        swapped = x.clone()
        first, second = 10, compare.CHUNK + 10
        swapped[[first, second]] = swapped[[second, first]]
        if not torch.equal(x[first].view(-1), x[second].view(-1)):
            assert bits_digest(swapped) != bits_digest(x), dtype


# ---------------------------------------------------------------- a timed call's sampled look
def sampled(expected, actual) -> bool:
    from forge_lsp.engine.harness.compare import sample_disagrees

    return sample_disagrees(expected, actual, tol)


def test_a_sample_sees_a_stale_result_and_not_rounding_noise():
    x = torch.randn(1024, 1024)
    assert not sampled(x * 1e3, (x * (1 + 1e-6)) * 1e3)  # within tolerance at the output's own scale
    assert sampled(x, torch.randn(1024, 1024))  # another call's result: wrong almost everywhere
    assert sampled(x, torch.empty_like(x).fill_(float("nan")))  # never written (NaN-poisoned)


def test_a_sample_reads_logical_positions_whatever_the_layout():
    x = torch.randn(512, 300)
    column_major = x.t().contiguous().t()  # same values, another layout: an honest output
    assert not sampled(x, column_major)
    y = column_major.clone()
    y[:, :150] += 1.0  # half the elements off: 1024 draws all missing them is impossible in practice
    assert sampled(x, y)


def test_a_sample_sends_structure_and_exact_types_to_the_full_comparison():
    x = torch.arange(10_000)
    assert not sampled((x, 2.0), (x.clone(), 2.0))
    assert sampled(x, x.float())  # dtype
    assert sampled((x, x), (x,))  # structure
    assert sampled(x, torch.flip(x, [0]))  # an integer output reordered
    assert sampled(torch.tensor(3.0), torch.tensor(4.0))  # fewer elements than the sample: all compared
