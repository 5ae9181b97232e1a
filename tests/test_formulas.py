"""formulas.py on the fused ops FlopCounterMode counts as 0: each equals the same module counted
op by op where it runs unfused, and a hand formula, exactly (integers)."""
import pytest
import torch
from torch import nn

from rooflab.count import count


def counted(fn, module=None):
    with torch.no_grad():
        return count(fn, module=module)


def test_lstm_on_a_cpu_counts_as_the_unfused_lstm():
    """nn.LSTM on a CPU is one oneDNN op (mkldnn_rnn_layer); on meta it runs step by step."""
    T, B, I, H = 10, 2, 32, 64
    fused = nn.LSTM(I, H, batch_first=True).eval()
    x = torch.randn(B, T, I)
    c = counted(lambda: fused(x), fused)
    if "mkldnn_rnn_layer" not in {r.op for r in c.records}:
        pytest.skip("this PyTorch runs the CPU LSTM without oneDNN")
    meta = nn.LSTM(I, H, batch_first=True).to("meta").eval()
    m = counted(lambda: meta(x.to("meta")), meta)
    # 10 * 2 * (32 + 64) * 256 = 491,520 MACs; + 2 biases of 4H, 4 joins and a cell of 9 a unit
    macs = T * B * (I + H) * 4 * H
    assert c.total_macs == m.total_macs == macs == 491_520
    assert c.total_flops == m.total_flops == 2 * macs + 2 * T * B * 4 * H + T * B * H * (4 + 9)
    assert not c.unsupported_ops()


def test_multihead_attentions_fast_path_counts_as_its_slow_one():
    """In eval under no_grad nn.MultiheadAttention is one op (_native_multi_head_attention); in
    training it runs linear, SDPA, linear: both count alike."""
    B, L, E = 2, 16, 64
    mha = nn.MultiheadAttention(E, 4, batch_first=True, dropout=0.0)
    x = torch.randn(B, L, E)
    runs = {}
    for train in (False, True):
        mha.train(train)
        runs[train] = counted(lambda: mha(x, x, x, need_weights=False), mha)
    assert "_native_multi_head_attention" in {r.op for r in runs[False].records}
    # projections 2*16*64*192 + 2*16*64*64, the core 2 * 2*16*16*64: 589,824 MACs
    macs = B * L * E * 3 * E + B * L * E * E + 2 * B * L * L * E
    assert runs[False].total_macs == runs[True].total_macs == macs == 589_824
    assert runs[False].total_flops == runs[True].total_flops == 2 * macs + B * L * 4 * E


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm(training):
    N, C, S = 4, 8, 16
    bn = nn.BatchNorm2d(C).train(training)
    x = torch.randn(N, C, S, S)
    c = counted(lambda: bn(x), bn)
    per = 4 + 4 * training  # subtract, divide, scale, shift; mean and variance when training
    norm = next(r for r in c.records if "batch_norm" in r.op)  # (training: +1 batches tracked)
    assert norm.flops == N * C * S * S * per + 2 * C and not c.unsupported_ops()
    if not training:  # the same normalisation, written out: 4 an element, 2 a channel
        mean, var = bn.running_mean.view(1, C, 1, 1), bn.running_var.view(1, C, 1, 1)
        w, b = bn.weight.view(1, C, 1, 1), bn.bias.view(1, C, 1, 1)
        by_hand = counted(lambda: (x - mean) / torch.sqrt(var + bn.eps) * w + b)
        assert by_hand.total_flops == norm.flops


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_reads_the_rows_it_touches(mode):
    """A 100k x 256 table, 4 bags of 80 ids: 0.33 MB of rows read, not the 102 MB table."""
    V, D, bags, per = 100_000, 256, 4, 80
    bag = nn.EmbeddingBag(V, D, mode=mode)
    ids = torch.randint(0, V, (bags, per))
    c = counted(lambda: bag(ids), bag)
    r = next(r for r in c.records if "embedding_bag" in r.op)
    rows = bags * per * D
    assert r.flops == rows + (bags * D if mode == "mean" else 0)
    assert r.bytes_read == ids.numel() * 8 + 8 * bags + rows * 4  # ids, offsets, rows (fp32)
    assert r.bytes_read < V * D * 4 / 250
    # the same sum as a gather and a reduction: one FLOP an element gathered
    by_hand = counted(lambda: nn.functional.embedding(ids, bag.weight).sum(1))
    assert by_hand.total_flops == rows
