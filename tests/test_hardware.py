import json

import pytest

from rooflab import hardware as H

REQUIRED = ["T4", "L4", "A10G", "A100-40GB", "A100-80GB", "RTX A6000", "L40S", "RTX 4090",
            "H100-SXM", "H100-PCIe", "H200", "B200", "MI300X"]


def test_required_presets_with_sources():
    for name in REQUIRED:
        hw = H.lookup(name)
        assert hw.source and hw.mem_bandwidth_bytes_per_s > 0 and hw.peak_flops_per_s
        assert "fp32" in hw.peak_flops_per_s


@pytest.mark.parametrize("given,expected", [
    ("NVIDIA H200", "H200"), ("h200", "H200"), ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100-40GB"), ("Tesla T4", "T4"), ("nvidia rtx a6000", "RTX A6000"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H100 PCIe", "H100-PCIe"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("a100_80gb", "A100-80GB"),
])
def test_lenient_lookup(given, expected):
    assert H.lookup(given).name == expected


def test_unknown_suggests():
    with pytest.raises(H.HardwareError, match="did you mean.*H200"):
        H.lookup("H2000")


def test_dense_peaks_h200():
    h = H.lookup("H200")
    assert h.peak("bf16") == 989.5e12  # dense, not the 1979 sparse figure
    assert h.ridge("bf16") == pytest.approx(989.5e12 / 4.8e12)  # ~206 FLOP/B
    with pytest.raises(H.HardwareError, match="no bf16 peak"):
        H.lookup("T4").peak("bf16")


def test_detect_named_and_cpu(monkeypatch):
    assert H.detect("NVIDIA H200").name == "H200"
    monkeypatch.setattr(H, "gpu_name_from_smi", lambda: None)
    monkeypatch.setattr(H, "_torch_gpu_name", lambda: None)  # as on a machine with no GPU
    cpu = H.detect()
    assert cpu.kind == "cpu" and not cpu.peak_flops_per_s
    odd = H.detect("NVIDIA Future GPU")
    assert odd.name == "NVIDIA Future GPU" and not odd.peak_flops_per_s


def test_spec_files(tmp_path):
    good = {"name": "Mine", "peak_flops_per_s": {"fp32": 1e12, "bfloat16": 4e12},
            "mem_bandwidth_bytes_per_s": 1e11, "sm_count": 10}
    p = tmp_path / "mine.json"
    p.write_text(json.dumps(good))
    hw = H.load_spec(str(p))
    assert hw.peak("bf16") == 4e12 and hw.sm_count == 10
    t = tmp_path / "mine.toml"
    t.write_text('name = "T"\nmem_bandwidth_bytes_per_s = 1e11\n[peak_flops_per_s]\nfp16 = 2e12\n')
    assert H.resolve(str(t)).peak("fp16") == 2e12


@pytest.mark.parametrize("data,msg", [
    ({"name": "x", "peak_flops_per_s": {"fp32": 1e12}}, "missing field"),
    ({"name": "x", "peak_flops_per_s": {"fp32": -1}, "mem_bandwidth_bytes_per_s": 1}, "positive"),
    ({"name": "x", "peak_flops_per_s": {"fp9": 1}, "mem_bandwidth_bytes_per_s": 1}, "dtype"),
    ({"name": "x", "peak_flops_per_s": {"fp32": 1}, "mem_bandwidth_bytes_per_s": 0}, "positive"),
])
def test_spec_validation(tmp_path, data, msg):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data))
    with pytest.raises(H.HardwareError, match=msg):
        H.load_spec(str(p))


def test_malformed_and_missing_files(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(H.HardwareError, match="malformed"):
        H.load_spec(str(p))
    with pytest.raises(H.HardwareError, match="cannot read"):
        H.load_spec(str(tmp_path / "nope.json"))
