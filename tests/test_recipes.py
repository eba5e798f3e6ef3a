"""Recipes are leaks: a statement that prescribes the change component by component gives the fix away.

Fixtures written in the shape of real squash messages and PR texts (component-labelled bullets, a prose
paragraph that places the change in named classes and files); nothing fetched.
"""

from __future__ import annotations

from sweserve.dataset.leaks import leak_findings, recipe_finding, recipe_item, recipe_steps
from sweserve.dataset.readiness import finding_kind
from sweserve.dataset.statement import build_statement, eligibility

ORACLE = """\
diff --git a/python/pkg/configs/widget.py b/python/pkg/configs/widget.py
--- a/python/pkg/configs/widget.py
+++ b/python/pkg/configs/widget.py
@@ -10,6 +10,8 @@ class WidgetConfig(PretrainedConfig):
         self.hidden_size = hidden_size
+        self.intermediate_size = intermediate_size
+        self.is_dense = num_experts is None
diff --git a/python/pkg/models/widget.py b/python/pkg/models/widget.py
--- a/python/pkg/models/widget.py
+++ b/python/pkg/models/widget.py
@@ -40,7 +40,9 @@ class WidgetDecoderLayer(nnx.Module):
-        self.mlp = WidgetMoE(config)
+        if config.is_dense:
+            self.mlp = WidgetMLP(config)
+        else:
+            self.mlp = WidgetMoE(config)
diff --git a/python/pkg/layers/expert_capturer.py b/python/pkg/layers/expert_capturer.py
--- a/python/pkg/layers/expert_capturer.py
+++ b/python/pkg/layers/expert_capturer.py
@@ -50,6 +50,8 @@ class ExpertCapturer(ABC):
     def create(model_config):
+        if model_config.top_k is None:
+            raise ValueError("no router")
diff --git a/python/pkg/mem/pool.py b/python/pkg/mem/pool.py
--- a/python/pkg/mem/pool.py
+++ b/python/pkg/mem/pool.py
@@ -85,6 +85,12 @@ class TokenPool:
         self.size = size
+        self.host_buf = None
+
+    def init_host_buffer(self, size):
+        if self.host_buf is None or self.host_buf.shape[0] < size:
+            self.host_buf = np.zeros(size, np.int32)
diff --git a/python/pkg/managers/tp_worker.py b/python/pkg/managers/tp_worker.py
--- a/python/pkg/managers/tp_worker.py
+++ b/python/pkg/managers/tp_worker.py
@@ -234,6 +234,8 @@ class ModelWorker:
         self.compiler = Compiler(config)
+        self.pool.init_host_buffer(
+            self.compiler.loc_buckets[-1]
+        )
"""
TESTS = """\
diff --git a/test/test_widget.py b/test/test_widget.py
--- a/test/test_widget.py
+++ b/test/test_widget.py
@@ -1,3 +1,6 @@
+def test_dense_layer_uses_mlp():
+    assert WidgetDecoderLayer(dense_config()).mlp is not None
"""

# A squash message in the shape of a real one: a motivation, then one bullet per component.
COMPONENT_BULLETS = """\
Generalize the MoE path to also serve dense widget checkpoints. Only the FFN block differs.

- config: add intermediate_size; default the MoE-only fields to None; add an is_dense discriminator.
- model: WidgetDecoderLayer branches the MLP construction on is_dense.
- capturer: guard ExpertCapturer.create() against router-less models (raise instead of crashing).
- tests: dense config and MLP dispatch cases.
"""

# A PR text whose paragraph places the change in named classes and files, with the oracle's own expression.
PROSE_RECIPE = """\
Every step allocates a fresh host array for the cache locations, which costs page faults on long contexts.

Allocate the buffer once at startup instead: TokenPool owns a host_buf, and tp_worker sizes it to the largest
bucket (loc_buckets[-1]) right after the Compiler is built.
"""

# A problem statement with a list of symptoms: it must survive whole.
SYMPTOMS = """\
Loading a dense widget checkpoint fails in several ways, depending on the options:

- The server crashes with `AttributeError: 'NoneType' object has no attribute 'top_k'` when expert capture is on.
- Generation returns empty text after the first token when the MoE-only fields are missing from the config.
- Crash: a `KeyError` on `mlp.experts.0.gate_proj.weight` while loading the weights.

Dense checkpoints should load and generate like the MoE ones; capturing experts on a model without a router
should be refused with a clear error instead of crashing.
"""


def test_component_bullets_are_a_recipe_in_the_leak_check():
    finding = recipe_finding("# Widget dense support\n\n" + COMPONENT_BULLETS, ORACLE)
    assert finding is not None and finding.startswith("statement prescribes the change component by component")
    assert finding_kind(finding) == "recipe"
    assert any(f.startswith("statement prescribes") for f in leak_findings(COMPONENT_BULLETS, ORACLE, TESTS))
    assert recipe_item("- config: add intermediate_size to the config", ORACLE)
    assert recipe_item("- Add `intermediate_size` to `WidgetConfig`", ORACLE)  # an imperative step naming code


def test_component_bullets_are_cut_when_the_statement_is_built():
    st = build_statement("Widget dense support", COMPONENT_BULLETS, oracle_patch=ORACLE, tests_patch=TESTS)
    assert "Generalize the MoE path" in st.text
    assert "config:" not in st.text and "capturer:" not in st.text and "is_dense discriminator" not in st.text
    cut = [p for p in st.quality.parts if not p.kept]
    assert any("change to a named component" in p.why or "in a list of the change's steps" in p.why for p in cut)
    assert eligibility(st, ORACLE, TESTS, 20).quality.statement_eligible


def test_prose_that_places_the_change_in_components_is_a_recipe():
    steps = recipe_steps(PROSE_RECIPE, ORACLE)
    assert len(steps) == 1 and "TokenPool owns" in steps[0]
    assert recipe_finding(PROSE_RECIPE, ORACLE) is not None
    st = build_statement("perf: reuse the host buffer", PROSE_RECIPE, oracle_patch=ORACLE, tests_patch=TESTS)
    assert "page faults" in st.text and "TokenPool owns" not in st.text
    assert recipe_finding(st.text, ORACLE) is None


def test_a_problem_with_a_list_of_symptoms_survives():
    assert recipe_steps(SYMPTOMS, ORACLE) == [] and recipe_finding(SYMPTOMS, ORACLE) is None
    for mode_text in (SYMPTOMS,):
        st = build_statement("Dense widget checkpoints do not load", mode_text, oracle_patch=ORACLE,
                             tests_patch=TESTS)
        for line in ("The server crashes with", "Generation returns empty text", "Crash: a `KeyError`",
                     "should be refused with a clear error"):
            assert line in st.text, line
    assert not [f for f in leak_findings(SYMPTOMS, ORACLE, TESTS) if f.startswith("statement prescribes")]


def test_one_labelled_note_or_a_bug_sentence_is_not_a_recipe():
    one = "Dense widgets crash at load.\n\n- config: the MoE-only fields have no default.\n"
    assert recipe_finding(one, ORACLE) is None  # one component named is a problem, not a recipe
    bug = ("`WidgetDecoderLayer` calls `ExpertCapturer.create()` with `loc_buckets[-1]`, but the pool is "
           "sized for the MoE layout and the call crashes.\n")
    assert recipe_finding(bug, ORACLE) is None  # the bug, however much code it names
    # the Requirements and interface sections say what must hold: never a recipe
    reqs = ("Dense widgets crash at load.\n\n## Requirements\n\n- `WidgetConfig(...)` takes a new parameter "
            "`intermediate_size`.\n- `TokenPool.init_host_buffer`: new method.\n")
    assert recipe_finding(reqs, ORACLE) is None
    # labels that are not components ("Crash:", "Before:") lead no recipe
    labelled = "- Crash: on load of `WidgetConfig`\n- Before: `worker` was slow\n"
    assert recipe_finding(labelled, ORACLE) is None


def test_a_sentence_naming_only_the_interface_is_not_a_recipe():
    # what the new names do, with a call the oracle adds, but no file or module the change goes to
    said = ("Dense widgets need a `WidgetMLP` whose output matches `WidgetMoE` on one expert, and "
            "`init_host_buffer(size)` must grow the buffer.\n")
    assert recipe_finding(said, ORACLE) is None
