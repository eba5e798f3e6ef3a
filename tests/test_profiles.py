import json

import pytest

from sweserve.config_search import ConfigSearch
from sweserve.dataset.profiles import load_profile
from sweserve.errors import SweserveError


def test_sglang_layout_families():
    p = load_profile("sglang")
    cases = {
        "python/sglang/srt/models/qwen2.py": "model-support",
        "python/sglang/srt/speculative/eagle_worker.py": "decoding",
        "python/sglang/srt/constrained/xgrammar_backend.py": "decoding",
        "python/sglang/srt/disaggregation/prefill.py": "distributed",
        "python/sglang/srt/entrypoints/openai/serving_chat.py": "serving-api",
        "python/sglang/srt/function_call/qwen25_detector.py": "serving-api",
        "sgl-kernel/csrc/gemm/fp8.cu": "kernels-quant",
        "python/sglang/srt/layers/attention/flashinfer_backend.py": "kernels-quant",
        "python/sglang/srt/mem_cache/radix_cache.py": "scheduling-memory",
        "python/sglang/srt/managers/scheduler.py": "scheduling-memory",
    }
    for path, family in cases.items():
        assert p.classification("Some change", [path]).family == family, path
    assert p.classification("Touch docs", ["docs/index.md"]).family is None


def test_title_tag_wins_then_majority():
    p = load_profile("sglang")
    paths = ["python/sglang/srt/managers/scheduler.py", "python/sglang/srt/managers/io.py",
             "python/sglang/srt/models/llama.py"]
    assert p.classification("Refactor", paths).family == "scheduling-memory"
    assert p.classification("[Model] Refactor", paths).family == "model-support"
    assert p.classification("[Unrelated] Refactor", paths).family == "scheduling-memory"


def test_test_paths():
    p = load_profile("sglang")
    assert p.is_test_file("test/srt/test_radix.py")
    assert p.is_test_file("python/sglang/srt/layers/tests/test_x.py")
    assert p.is_test_path("test/srt/conftest.py") and not p.is_test_file("test/srt/conftest.py")
    assert not p.is_test_path("python/sglang/srt/models/llama.py")


def test_extends_and_errors(tmp_path, monkeypatch):
    demo = load_profile("sglang-demo")
    assert demo.repo == "sweserve-demo/sglang-mini" and demo.family_rules == load_profile("sglang").family_rules
    search = ConfigSearch(tmp_path)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "a.json").write_text(json.dumps({"extends": "b"}))
    (tmp_path / "profiles" / "b.json").write_text(json.dumps({"extends": "a"}))
    (tmp_path / "profiles" / "bad.json").write_text(json.dumps({"repo": "x/y", "test_paths": [], "family_rules": [{"family": "nope"}]}))
    (tmp_path / "profiles" / "latin.json").write_bytes(b'{"repo": "caf\xe9/x"}')
    with pytest.raises(SweserveError, match="loops back"):
        load_profile("a", search)
    with pytest.raises(SweserveError, match=r"bad.json: field 'family_rules.0.family'"):
        load_profile("bad", search)
    with pytest.raises(SweserveError, match="unknown profile: zzz"):
        load_profile("zzz", search)
    with pytest.raises(SweserveError, match="latin.json: not valid JSON: not UTF-8"):
        load_profile("latin", search)


def test_families_weighted_by_changed_lines_with_confidence():
    from sweserve.dataset.mining import FileChange

    p = load_profile("sglang-jax")
    # three small scheduler files against one big sampler change: lines decide, not file counts
    changes = [FileChange("M", f"python/sgl_jax/srt/managers/m{i}.py", added=3, deleted=1) for i in range(3)]
    changes += [FileChange("M", "python/sgl_jax/srt/layers/sampler.py", added=70, deleted=18),
                FileChange("M", "README.md", added=0, deleted=0)]  # counts one line
    c = p.classification("Fix min-p", changes)
    assert (c.family, c.source) == ("decoding", "paths")
    assert c.lines == {"scheduling-memory": 12, "decoding": 88} and c.total == 101
    assert c.confidence == round(88 / 101, 3)
    assert p.classification("Fix min-p", changes).family == "decoding"
    # a title tag still wins; its confidence says how little of the change is under its paths
    tagged = p.classification("[Scheduler] Fix min-p", changes)
    assert (tagged.family, tagged.confidence, tagged.source) == ("scheduling-memory", round(12 / 101, 3), "title_tag")


def test_sampling_code_is_decoding_not_kernels():
    p = load_profile("sglang-jax")
    for path in ("python/sgl_jax/srt/layers/sampler.py", "python/sgl_jax/srt/layers/logits_processor.py",
                 "python/sgl_jax/srt/sampling/sampling_batch_info.py"):
        assert p.family_of_path(path) == "decoding", path
    assert p.family_of_path("python/sgl_jax/srt/layers/linear.py") == "kernels-quant"
    assert p.family_of_path("python/sgl_jax/srt/layers/sequence_parallel_utils.py") == "distributed"
    assert load_profile("sglang").family_of_path("python/sglang/srt/layers/sampler.py") == "decoding"


def test_per_pr_override_in_the_profile_wins(tmp_path):
    raw = load_profile("sglang-jax").model_dump(exclude={"name"})
    raw["family_overrides"] = {"1534": "serving-api"}
    (tmp_path / "jax.json").write_text(json.dumps(raw))
    p = load_profile(str(tmp_path / "jax.json"))
    paths = ["python/sgl_jax/srt/speculative/eagle.py"]
    assert p.classification("[Spec] Eagle", paths, pr_number=1534).model_dump() == {
        "family": "serving-api", "confidence": 0.0, "lines": {"decoding": 1}, "total": 1, "source": "override"}
    assert p.classification("[Spec] Eagle", paths).family == "decoding"  # other PRs: rules as usual
