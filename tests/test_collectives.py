"""The collective ceiling: nccl-tests' bus-bandwidth convention (exact), the interpolation the
tensor-parallel prediction uses, and a real measurement between two gloo processes on the CPU."""
import json

import pytest

from rooflab import models as M
from rooflab import parallel as P
from rooflab.measure import collectives as K


def test_bus_bandwidth_is_nccl_tests_convention():
    assert K.bus_bandwidth("all_reduce", 1000, 1.0, 2) == 1000        # 2(n-1)/n = 1
    assert K.bus_bandwidth("all_reduce", 1000, 1.0, 8) == 1750        # 2 * 7/8
    assert K.bus_bandwidth("all_gather", 1000, 1.0, 4) == 750         # 3/4
    assert K.bus_bandwidth("reduce_scatter", 1000, 2.0, 4) == 375


SYNTHETIC = {"world_size": 2, "backend": "nccl", "device_name": "GPU", "date": "today",
             "latency_floor_s": {"all_reduce": 45e-6},
             "rows": [{"op": "all_reduce", "message_bytes": 1 << 20, "time_s": 45e-6},
                      {"op": "all_reduce", "message_bytes": 1 << 22, "time_s": 60e-6},
                      {"op": "all_reduce", "message_bytes": 1 << 30, "time_s": 3.2e-3}]}


def test_time_interpolates_between_measured_sizes():
    assert P.collective_time_s(SYNTHETIC, "all_reduce", 1000) == 45e-6                 # the floor
    mid = (1 << 20) + ((1 << 22) - (1 << 20)) // 2
    assert P.collective_time_s(SYNTHETIC, "all_reduce", mid) == pytest.approx(52.5e-6)
    assert P.collective_time_s(SYNTHETIC, "all_reduce", 1 << 31) == pytest.approx(6.4e-3)  # its bandwidth


def test_tp_communication_on_a_measurement():
    cfg = M.load("Llama-3.1-8B")
    ph = M.Phase.decode(8, 1024)  # 8 tokens x 4096 hidden x 2 bytes = 64 KiB per all-reduce
    c = P.communication(cfg, ph, 2, layers=32, measured=SYNTHETIC)
    assert c["message_bytes"] == 8 * 4096 * 2 and c["all_reduces"] == 64
    assert c["predicted_s"] == pytest.approx(64 * 45e-6)  # below 1 MiB: the latency floor
    assert "measured: nccl" in c["link"]
    assert P.communication(cfg, ph, 4, 32, measured=SYNTHETIC)["predicted_s"] is None  # 2 ranks
    # a whole model: one more all-reduce (the embedding) and the logits' all-gather, timed as
    # half an all-reduce of its size where the measurement has no all-gather
    whole = P.communication(cfg, ph, 2, 32, measured=SYNTHETIC, vocab_parallel=True)
    gather = P.collective_time_s(SYNTHETIC, "all_reduce", 8 * 128256 * 2) / 2
    assert whole["predicted_s"] == pytest.approx(65 * 45e-6 + gather)


def test_cli_without_gpus_one_line(capsys):
    from rooflab.cli import main

    if K.gpu_count() >= 2:
        pytest.skip("this machine has several GPUs")
    assert main(["collectives"]) == 2
    err = capsys.readouterr().err
    assert "two or more GPUs" in err and err.count("\n") == 1


def test_gloo_between_two_processes(capsys, tmp_path, monkeypatch):
    from rooflab.cli import main

    monkeypatch.setenv("ROOFLAB_CACHE", str(tmp_path))
    assert main(["collectives", "--device", "cpu", "--sizes", "4096,65536", "--json"]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)
    # a line on stderr for each op and size as the ranks finish it, not silence until the end
    assert [line.split(":")[1].strip() for line in err.splitlines()[1:]] == [
        f"{op} of {n:,} bytes" for op in K.OPS for n in (4096, 65536)]
    assert d["backend"] == "gloo" and d["world_size"] == 2 and len(d["rows"]) == 6
    assert all(r["time_s"] > 0 for r in d["rows"])
    r = d["rows"][0]
    assert r["busbw_bytes_per_s"] == K.bus_bandwidth(r["op"], r["message_bytes"], r["time_s"], 2)
    assert d["latency_floor_s"]["all_reduce"] > 0
    assert not list(tmp_path.iterdir())  # a partial sweep is not cached
    assert main(["collectives", "--device", "cpu", "--sizes", "4097"]) == 2  # splits unevenly
    capsys.readouterr()
    assert main(["collectives", "--device", "cpu", "--sizes", "4096"]) == 0  # the console view
    out = capsys.readouterr().out
    assert "gloo collectives, 2 x CPU processes" in out and "all_reduce: latency floor" in out


@pytest.mark.gpu
def test_nccl_and_a_split_layer_on_two_gpus():
    if K.gpu_count() < 2:
        pytest.skip("needs two GPUs")
    from rooflab.studies import tp_layer as T
    from rooflab.measure import ceilings as CE
    from rooflab.measure import op_classes as OC

    coll = K.measure_collectives("cuda", 2, [1 << 20, 1 << 24], iters=5)
    assert coll["backend"] == "nccl" and all(r["time_s"] > 0 for r in coll["rows"])
    r = T.measure_split(M.load(), "full", M.Phase.decode(1, 1024), 2, coll, CE.get("cuda"),
                  OC.measure_op_costs("cuda"))
    assert len(r["ranks"]) == 2 and r["predicted_s"] > r["predicted_communication_s"] > 0
    assert all("device_s" in rank["eager"] for rank in r["ranks"])


def _abort_after_rank0_writes(rank, wrote: bool, out_path):
    import os
    import time
    if rank == 0 and wrote:
        K.write_result(out_path, {"ok": 1})
    if rank == 1:  # the teardown abort: after rank 0's results, or (wrote=False) before any
        while wrote and not os.path.exists(out_path):
            time.sleep(0.01)
        os.abort()
    time.sleep(0 if wrote else 30)


def test_spawn_keeps_results_written_before_a_rank_aborts():
    """A rank that aborts after rank 0 wrote its results does not lose them; one that aborts
    before any were written still fails the run."""
    import torch.multiprocessing as mp
    assert K.spawn(_abort_after_rank0_writes, (True,), 2) == {"ok": 1}
    with pytest.raises(mp.ProcessExitedException):
        K.spawn(_abort_after_rank0_writes, (False,), 2)
