import math

import pytest

from rooflab import cost as C
from rooflab import hardware as H
from rooflab import roofline as R


def test_ridge_attainable_bound_floor():
    roof = R.Roof("x", 100e12, 1e12)  # ridge 100 FLOP/B
    assert roof.ridge == 100
    assert R.attainable(roof, 10) == 10e12 and R.attainable(roof, 1000) == 100e12
    assert R.bound(roof, 99.9) == "memory" and R.bound(roof, 100) == "compute"
    assert R.time_floor_s(roof, 100e12, 1e9) == 1.0  # compute term dominates
    assert R.time_floor_s(roof, 1, 2e12) == 2.0  # memory term dominates


def test_gemm_crossover_a6000_fp32():
    roof = R.Roof.of(H.lookup("RTX A6000"), "fp32")  # ridge 38.7e12 / 768e9 = 50.39
    n = R.crossover(roof, lambda n: C.gemm(n, n, n, "fp32"))
    assert n == 303  # intensity n/6: 302/6 = 50.33 < 50.39 <= 303/6 = 50.5
    assert R.sweep("gemm", roof, [64, 4096]).points[0].bound == "memory"


def test_gemv_never_compute_bound_on_gpus():
    for name in H.names():
        roof = R.Roof.of(H.lookup(name), "fp32")
        assert R.crossover(roof, lambda n: C.gemv(n, n, "fp32"), n_max=1 << 30) is None


@pytest.mark.parametrize("gpu,dtype", [("H200", "bf16"), ("T4", "fp16"), ("MI300X", "fp8")])
def test_crossover_is_smallest(gpu, dtype):
    roof = R.Roof.of(H.lookup(gpu), dtype)
    fam = lambda n: C.gemm(n, n, n, dtype)  # noqa: E731
    n = R.crossover(roof, fam)
    assert fam(n).intensity >= roof.ridge > fam(n - 1).intensity


def test_sweep_rows():
    sw = R.sweep("gemm", R.Roof.of(H.lookup("H200"), "bf16"), [1024, 8192]).as_dict()
    assert sw["crossover_n"] == 619  # 2n^3/(2*3n^2) = n/3 >= 206.15 -> n = 619
    assert [r["n"] for r in sw["rows"]] == [1024, 8192]
    assert all(math.isfinite(r["time_floor_s"]) for r in sw["rows"])
