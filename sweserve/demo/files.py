"""Source texts of the demo repository, sglang-mini: a toy SGLang-shaped serving engine.

Each PR below fixes a real bug or adds a feature, with a test that fails before and passes after.
"""

INIT = {
    "README.md": "# sglang-mini\n\nA toy serving engine shaped like SGLang, used by sweserve's demo.\n",
    "python/pyproject.toml": '[project]\nname = "sglang-mini"\nversion = "0.0.1"\n',
    "python/sglang/__init__.py": '__version__ = "0.0.1"\n',
    "python/sglang/srt/__init__.py": "",
    "python/sglang/srt/models/__init__.py": "",
    "python/sglang/srt/models/llama.py": '''"""Llama: the reference decoder-only architecture."""


class LlamaForCausalLM:
    attention_bias = False

    def __init__(self, config: dict):
        self.hidden_size = config["hidden_size"]
        self.num_layers = config["num_hidden_layers"]
        self.num_heads = config["num_attention_heads"]
        self.num_kv_heads = config.get("num_key_value_heads", self.num_heads)

    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads
''',
    "python/sglang/srt/models/registry.py": '''"""Model registry: maps a Hugging Face architecture name to its implementation."""

from sglang.srt.models.llama import LlamaForCausalLM

_MODELS = {"LlamaForCausalLM": LlamaForCausalLM}


def get_model_class(architecture: str):
    try:
        return _MODELS[architecture]
    except KeyError:
        raise ValueError(f"unsupported architecture: {architecture}") from None


def supported_architectures():
    return sorted(_MODELS)
''',
    "python/sglang/srt/sampling/__init__.py": "",
    "python/sglang/srt/sampling/sampler.py": '''"""Token sampling helpers over plain lists of logits/probabilities."""

import math


def softmax(logits):
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]
    total = sum(exps)
    return [e / total for e in exps]


def greedy(logits):
    return max(range(len(logits)), key=lambda i: logits[i])


def top_p_filter(probs, top_p):
    """Keep the most likely tokens whose cumulative probability reaches top_p, renormalised."""
    order = sorted(range(len(probs)), key=lambda i: -probs[i])
    kept, total = [], 0.0
    for i in order:
        total += probs[i]
        if total > top_p:
            break
        kept.append(i)
    mass = sum(probs[i] for i in kept)
    out = [0.0] * len(probs)
    for i in kept:
        out[i] = probs[i] / mass
    return out
''',
    "python/sglang/srt/distributed/__init__.py": "",
    "python/sglang/srt/distributed/parallel_state.py": '''"""Tensor-parallel bookkeeping."""


def shard_range(size: int, world_size: int, rank: int) -> tuple[int, int]:
    """[start, end) of rank's shard when a dimension of `size` is split over world_size ranks."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} out of range for world size {world_size}")
    per = size // world_size
    return rank * per, (rank + 1) * per
''',
    "python/sglang/srt/function_call/__init__.py": "",
    "python/sglang/srt/function_call/json_parser.py": '''"""Parse tool calls out of model output for the OpenAI-compatible API."""

import json
import re

_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


def parse_tool_calls(text: str) -> list[dict]:
    """<tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks → [{"name", "arguments"}]."""
    match = _BLOCK.search(text)
    if match is None:
        return []
    call = json.loads(match.group(1))
    return [{"name": call["name"], "arguments": call.get("arguments", {})}]
''',
    "python/sglang/srt/layers/__init__.py": "",
    "python/sglang/srt/layers/quantization/__init__.py": "",
    "python/sglang/srt/layers/quantization/int8.py": '''"""Symmetric per-tensor int8 quantization."""


def quantize_symmetric(values):
    """values → (int8 codes, scale) with values ≈ codes * scale."""
    peak = max((abs(v) for v in values), default=0.0)
    scale = peak / 127 if peak else 1.0
    codes = [int(v / scale) for v in values]
    return codes, scale


def dequantize(codes, scale):
    return [c * scale for c in codes]
''',
    "python/sglang/srt/mem_cache/__init__.py": "",
    "python/sglang/srt/mem_cache/radix_cache.py": '''"""A radix tree over token ids, for prefix reuse of KV cache across requests."""


def _common(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class _Node:
    def __init__(self, key=()):
        self.key = tuple(key)
        self.children = {}


class RadixCache:
    def __init__(self):
        self.root = _Node()
        self.size = 0  # cached tokens

    def match_prefix(self, tokens) -> int:
        """Length of the longest cached prefix of tokens."""
        node, tokens, matched = self.root, tuple(tokens), 0
        while tokens:
            child = node.children.get(tokens[0])
            if child is None:
                break
            n = _common(child.key, tokens)
            matched += n
            if n < len(child.key):
                break
            node, tokens = child, tokens[n:]
        return matched

    def insert(self, tokens) -> None:
        node, tokens = self.root, tuple(tokens)
        while tokens:
            child = node.children.get(tokens[0])
            if child is None:
                node.children[tokens[0]] = _Node(tokens)
                self.size += len(tokens)
                return
            n = _common(child.key, tokens)
            if n < len(child.key):
                mid = _Node(child.key[:n])
                mid.children[child.key[0]] = child
                child.key = child.key[n:]
                node.children[tokens[0]] = mid
                child = mid
            node, tokens = child, tokens[n:]
''',
    "test/srt/test_model_registry.py": '''import pytest

from sglang.srt.models.registry import get_model_class, supported_architectures

CONFIG = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}


def test_llama_registered():
    model = get_model_class("LlamaForCausalLM")(CONFIG)
    assert model.head_dim() == 16
    assert "LlamaForCausalLM" in supported_architectures()


def test_unknown_architecture():
    with pytest.raises(ValueError):
        get_model_class("NoSuchForCausalLM")
''',
    "test/srt/test_sampler.py": '''import math

from sglang.srt.sampling.sampler import greedy, softmax, top_p_filter


def test_softmax_sums_to_one():
    assert math.isclose(sum(softmax([1.0, 2.0, 3.0])), 1.0)


def test_greedy():
    assert greedy([0.1, 2.0, -1.0]) == 1


def test_top_p_keeps_head():
    out = top_p_filter([0.5, 0.3, 0.2], 0.75)
    assert out[2] == 0.0 and math.isclose(sum(out), 1.0)
''',
    "test/srt/test_parallel_state.py": '''from sglang.srt.distributed.parallel_state import shard_range


def test_even_split():
    assert [shard_range(8, 4, r) for r in range(4)] == [(0, 2), (2, 4), (4, 6), (6, 8)]
''',
    "test/srt/test_function_call.py": '''from sglang.srt.function_call.json_parser import parse_tool_calls


def test_single_call():
    text = 'ok <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    assert parse_tool_calls(text) == [{"name": "get_weather", "arguments": {"city": "Paris"}}]


def test_no_call():
    assert parse_tool_calls("just text") == []
''',
    "test/srt/test_int8.py": '''from sglang.srt.layers.quantization.int8 import dequantize, quantize_symmetric


def test_zeros():
    codes, scale = quantize_symmetric([0.0, 0.0])
    assert codes == [0, 0] and scale == 1.0


def test_peak_maps_to_127():
    codes, _ = quantize_symmetric([127.0, -3.0])
    assert codes[0] == 127
''',
    "test/srt/test_radix_cache.py": '''from sglang.srt.mem_cache.radix_cache import RadixCache


def test_single_sequence():
    cache = RadixCache()
    cache.insert([1, 2, 3])
    assert cache.match_prefix([1, 2, 3, 4]) == 3
    assert cache.match_prefix([9]) == 0
    assert cache.size == 3
''',
}

PR_MODEL = {
    "python/sglang/srt/models/qwen2.py": '''"""Qwen2: Llama-like, with bias on the QKV projections."""

from sglang.srt.models.llama import LlamaForCausalLM


class Qwen2ForCausalLM(LlamaForCausalLM):
    attention_bias = True

    def __init__(self, config: dict):
        super().__init__(config)
        self.tie_word_embeddings = config.get("tie_word_embeddings", False)
''',
    "python/sglang/srt/models/registry.py": INIT["python/sglang/srt/models/registry.py"].replace(
        'from sglang.srt.models.llama import LlamaForCausalLM\n\n_MODELS = {"LlamaForCausalLM": LlamaForCausalLM}',
        'from sglang.srt.models.llama import LlamaForCausalLM\nfrom sglang.srt.models.qwen2 import Qwen2ForCausalLM\n\n'
        '_MODELS = {"LlamaForCausalLM": LlamaForCausalLM, "Qwen2ForCausalLM": Qwen2ForCausalLM}',
    ),
    "test/srt/test_model_registry.py": INIT["test/srt/test_model_registry.py"] + '''

def test_qwen2_registered():
    model = get_model_class("Qwen2ForCausalLM")({**CONFIG, "num_key_value_heads": 2})
    assert model.attention_bias is True
    assert model.num_kv_heads == 2
''',
}

PR_SAMPLING = {
    "python/sglang/srt/sampling/sampler.py": INIT["python/sglang/srt/sampling/sampler.py"].replace(
        "        total += probs[i]\n        if total > top_p:\n            break\n        kept.append(i)\n",
        "        kept.append(i)\n        total += probs[i]\n        if total >= top_p:\n            break\n",
    ),
    "test/srt/test_sampler.py": INIT["test/srt/test_sampler.py"] + '''

def test_top_p_keeps_at_least_one_token():
    out = top_p_filter([0.9, 0.05, 0.05], 0.5)
    assert out == [1.0, 0.0, 0.0]
''',
}

PR_DISTRIBUTED = {
    "python/sglang/srt/distributed/parallel_state.py": INIT["python/sglang/srt/distributed/parallel_state.py"].replace(
        "    per = size // world_size\n    return rank * per, (rank + 1) * per\n",
        "    per, extra = divmod(size, world_size)\n"
        "    start = rank * per + min(rank, extra)\n"
        "    return start, start + per + (1 if rank < extra else 0)\n",
    ),
    "test/srt/test_parallel_state.py": INIT["test/srt/test_parallel_state.py"] + '''

def test_uneven_split_covers_everything():
    shards = [shard_range(10, 4, r) for r in range(4)]
    assert shards == [(0, 3), (3, 6), (6, 8), (8, 10)]
''',
}

PR_SERVING = {
    "python/sglang/srt/function_call/json_parser.py": INIT["python/sglang/srt/function_call/json_parser.py"].replace(
        '''    match = _BLOCK.search(text)
    if match is None:
        return []
    call = json.loads(match.group(1))
    return [{"name": call["name"], "arguments": call.get("arguments", {})}]
''',
        '''    calls = []
    for block in _BLOCK.findall(text):
        call = json.loads(block)
        calls.append({"name": call["name"], "arguments": call.get("arguments", {})})
    return calls
''',
    ),
    "test/srt/test_function_call.py": INIT["test/srt/test_function_call.py"] + '''

def test_parallel_calls():
    text = (
        '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    )
    assert [c["name"] for c in parse_tool_calls(text)] == ["a", "b"]
''',
}

PR_QUANT = {
    "python/sglang/srt/layers/quantization/int8.py": INIT["python/sglang/srt/layers/quantization/int8.py"].replace(
        "    codes = [int(v / scale) for v in values]\n",
        "    codes = [max(-128, min(127, round(v / scale))) for v in values]\n",
    ),
    "test/srt/test_int8.py": INIT["test/srt/test_int8.py"] + '''

def test_round_trip_error_is_half_a_step():
    values = [1.0, 0.4, -0.6, 0.123, -0.999]
    codes, scale = quantize_symmetric(values)
    for v, back in zip(values, dequantize(codes, scale)):
        assert abs(v - back) <= scale / 2 + 1e-12
''',
}

PR_RADIX = {
    "python/sglang/srt/mem_cache/radix_cache.py": INIT["python/sglang/srt/mem_cache/radix_cache.py"].replace(
        "                mid.children[child.key[0]] = child\n                child.key = child.key[n:]\n",
        "                child.key = child.key[n:]\n                mid.children[child.key[0]] = child\n",
    ),
    "test/srt/test_radix_cache.py": INIT["test/srt/test_radix_cache.py"] + '''

def test_split_keeps_both_branches():
    cache = RadixCache()
    cache.insert([1, 2, 3, 4])
    cache.insert([1, 2, 5])
    assert cache.match_prefix([1, 2, 3, 4]) == 4
    assert cache.match_prefix([1, 2, 5, 6]) == 3
''',
}

PR_DOCS = {"README.md": INIT["README.md"] + "\nRun the tests with `PYTHONPATH=python pytest test`.\n"}

PR_TESTS_ONLY = {
    "test/srt/test_sampler.py": PR_SAMPLING["test/srt/test_sampler.py"] + '''

def test_greedy_first_of_ties():
    assert greedy([1.0, 1.0]) == 0
''',
}
