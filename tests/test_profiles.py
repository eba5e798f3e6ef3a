import json

import pytest

from sweserve.config_search import ConfigSearch
from sweserve.dataset.gitio import FileChange
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
    assert c.share("decoding") == round(88 / 101, 3)
    assert c.confidence == c.scores["decoding"]  # one source of truth: the recorded confidence is the score
    assert p.classification("Fix min-p", changes).family == "decoding"
    assert c.confident and c.scores["decoding"] > 0.8
    # a title tag is one signal among several: against 88% of the lines it makes the family uncertain
    tagged = p.classification("[Scheduler] Fix min-p", changes)
    assert (tagged.family, tagged.source, tagged.confident) == ("decoding", "paths", False)
    assert 0 < tagged.scores["decoding"] - tagged.scores["scheduling-memory"] < p.family_min_margin


def test_a_family_no_changed_line_supports_is_not_confident():
    from sweserve.dataset.mining import FileChange

    p = load_profile("sglang-jax")
    # a fix in a shared utility whose title names a role: the title alone decides the family, no line does
    loader = [FileChange("M", "python/sgl_jax/srt/utils/weight_utils.py", added=40, deleted=5)]
    c = p.classification("fix(model): split the fused scale of a new model", loader)
    assert c.family is not None and c.share(c.family) == 0.0
    assert c.scores[c.family] >= p.family_min_score and not c.confident
    assert c.confidence == c.scores[c.family]
    # the same title with a changed line under the family's paths is confident
    model = loader + [FileChange("M", "python/sgl_jax/srt/models/llama.py", added=10, deleted=2)]
    m = p.classification("fix(model): split the fused scale of a new model", model)
    assert m.family == "model-support" and m.share("model-support") > 0 and m.confident


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
    c = p.classification("[Spec] Eagle", paths, pr_number=1534)
    assert c.model_dump(include={"family", "confidence", "lines", "total", "source", "confident"}) == {
        "family": "serving-api", "confidence": 0.0, "lines": {"decoding": 1}, "total": 1, "source": "override",
        "confident": True}
    assert c.scores == {"decoding": 1.0}  # what the signals said, kept for the record
    assert p.classification("[Spec] Eagle", paths).family == "decoding"  # other PRs: rules as usual


def test_roles_tests_title_and_labels_are_signals():
    p = load_profile("sglang-jax")
    front = ["python/sgl_jax/srt/managers/detokenizer_manager.py", "python/sgl_jax/srt/managers/scheduler.py"]
    # a streaming front-end change: the detokenizer's role, its test's name and the title all say serving-api
    c = p.classification("fix(detokenizer): stream incremental text without duplicates",
                         [FileChange("M", "python/sgl_jax/srt/managers/detokenizer_manager.py", added=60, deleted=20),
                          FileChange("M", "python/sgl_jax/srt/managers/scheduler.py", added=10, deleted=2)],
                         tests=["test/srt/test_detokenizer_streaming.py"])
    assert (c.family, c.confident) == ("serving-api", True), c
    assert set(c.signals) == {"paths", "roles", "tests", "tags", "title"}
    assert c.signals["tests"] == {"serving-api": 1.0}
    # the folder role owns what lies under it: a model file named after MoE is still a model
    assert p.family_of_role("python/sgl_jax/srt/models/bailing_moe.py") == "model-support"
    assert p.family_of_role("python/sgl_jax/srt/managers/tokenizer_manager.py") == "serving-api"
    assert p.family_of_role("python/sgl_jax/srt/kernels/fused_moe/v1/kernel.py") == "kernels-quant"
    assert p.family_of_role("README.md") is None
    # labels count when GitHub gave them; lines split between two families are not confident
    split = [FileChange("M", front[0], added=30, deleted=0),
             FileChange("M", "python/sgl_jax/srt/mem_cache/radix_cache.py", added=30, deleted=0)]
    plain = p.classification("Refactor", split)
    assert not plain.confident
    labelled = p.classification("Refactor", split, labels=["OpenAI API", "frontend"])
    assert labelled.family == "serving-api" and labelled.signals["labels"] == {"serving-api": 1.0}
    assert labelled.scores["serving-api"] > plain.scores["serving-api"]


def test_no_signal_is_unclassified_and_weights_come_from_the_profile():
    p = load_profile("sglang-jax")
    c = p.classification("Touch docs", ["docs/index.md"], tests=["test/test_docs.py"])
    assert (c.family, c.confident, c.scores) == (None, False, {})
    only_paths = p.model_copy(update={"family_weights": {"roles": 0, "tests": 0, "tags": 0, "title": 0, "labels": 0}})
    changes = ["python/sgl_jax/srt/managers/tokenizer_manager.py"]
    assert only_paths.classification("fix(kernel): x", changes).family == "serving-api"
    mixed = p.classification("fix(kernel): x", changes)  # paths 3 + roles 2 against the tag's 3
    assert (mixed.family, mixed.scores) == ("serving-api", {"serving-api": 0.625, "kernels-quant": 0.375})
    heavy_tags = p.model_copy(update={"family_weights": {"tags": 10}})
    assert heavy_tags.classification("fix(kernel): x", changes).family == "kernels-quant"
