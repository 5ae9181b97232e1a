"""A decoder layer split Megatron's way over two processes (gloo on the CPU) computes what the
whole layer does: GQA with KV heads divided, a KV head replicated (fewer KV heads than ranks),
sliding attention and gemma's sandwich norms; without the all-reduces it does not."""
import pytest

pytest.importorskip("transformers")

from rooflab import models as M  # noqa: E402
from rooflab.studies import tp_layer as T  # noqa: E402

LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 1000, "max_position_embeddings": 256}
GEMMA = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
         "head_dim": 32, "vocab_size": 1000, "max_position_embeddings": 256,
         "sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"],
         "query_pre_attn_scalar": 32}


@pytest.mark.slow
@pytest.mark.parametrize("config, layer_type", [(LLAMA, "full"), (GEMMA, "sliding")])
def test_split_layer_equals_the_whole(config, layer_type):
    cfg = M.from_hf_dict(config, "tiny")
    assert T.check_split(cfg, layer_type, M.Phase.prefill(2, 24), tp=2) < 1e-5


@pytest.mark.slow
def test_without_the_all_reduces_it_differs():
    """The control: each rank's partial sums alone. Weights initialised as the model does (std
    0.02) keep the attention and MLP small beside the residual, so the output moves by a few
    parts in a thousand, against under 1e-5 with the all-reduces."""
    cfg = M.from_hf_dict(LLAMA, "tiny")
    assert T.check_split(cfg, "full", M.Phase.prefill(2, 24), tp=2, reduce=False) > 1e-3


def test_part6_answer_follows_the_numbers():
    from rooflab.lab.parts import p6_parallel as P6
    rows = [{"model": "gemma", "phase": "decode", "batch": 1, "tp1_device_s": 1e-4,
             "tp2_device_s": 1.5e-4, "tp2_communication_s": 9e-5, "speedup": 1e-4 / 1.5e-4},
            {"model": "Llama", "phase": "prefill", "batch": 1, "tp1_device_s": 2e-3,
             "tp2_device_s": 1.25e-3, "tp2_communication_s": 1e-4, "speedup": 1.6}]
    a = P6._answer(rows, {"latency_floor_s": {"all_reduce": 45e-6}})
    assert "It paid for Llama prefill B=1; it lost for gemma decode B=1." in a["text"]
    assert "latency floor 45 us" in a["text"] and a["figures"]["Llama_prefill_B1_speedup"] == 1.6
