"""A statement that maps the fix leaks it: naming, as code, most of the places the oracle changes.

Fixtures written in the shape of real squash messages (a changelog that says what each function now does and
lists the call sites switched) and of real problem reports (a traceback, a symptom naming the function that
returns the wrong value); nothing fetched.
"""

from __future__ import annotations

from sweserve.dataset.leaks import leak_findings, mapped_sites, recipe_finding
from sweserve.dataset.readiness import finding_kind
from sweserve.dataset.statement import build_statement, eligibility

ORACLE = """\
diff --git a/python/pkg/mem/pool.py b/python/pkg/mem/pool.py
--- a/python/pkg/mem/pool.py
+++ b/python/pkg/mem/pool.py
@@ -20,12 +20,18 @@ class SlotPool:
     def alloc(self, reqs):
-        if len(self.free_slots) < len(reqs):
+        fresh = [r for r in reqs if r.slot is None]
+        if len(self.free_slots) < len(fresh):
             return None
-        out = self.free_slots[: len(reqs)]
+        out = self.free_slots[: len(fresh)]
+        for r, s in zip(fresh, out):
+            r.slot = s
         return out

     def free(self, req):
-        self.free_slots.append(req)
+        assert req.slot is not None
+        self.free_slots.append(req.slot)
+        req.slot = None
diff --git a/python/pkg/managers/scheduler.py b/python/pkg/managers/scheduler.py
--- a/python/pkg/managers/scheduler.py
+++ b/python/pkg/managers/scheduler.py
@@ -300,7 +300,6 @@ class Scheduler:
     def get_next_batch_to_run(self):
         if self.chunked_req is not None:
-            self.slot_pool.free(self.chunked_req.slot)
             self.last_batch = None
diff --git a/python/pkg/managers/batch.py b/python/pkg/managers/batch.py
--- a/python/pkg/managers/batch.py
+++ b/python/pkg/managers/batch.py
@@ -80,7 +80,7 @@ class Batch:
     def alloc_req_slots(self, reqs):
-        slots = self.slot_pool.alloc(len(reqs))
+        slots = self.slot_pool.alloc(reqs)
         return slots

     def release_req(self, req):
-        self.slot_pool.free(req.slot)
+        self.slot_pool.free(req)
"""
TESTS = """\
diff --git a/test/test_pool.py b/test/test_pool.py
--- /dev/null
+++ b/test/test_pool.py
@@ -0,0 +1,6 @@
+from pkg.mem.pool import SlotPool
+
+def test_alloc_reuses_a_held_slot():
+    pool = SlotPool(4)
+    assert pool.alloc([FakeReq(slot=2)]) == []
"""

# The shape of a real squash message: the problem, then what each function now does and which call sites
# were switched. Descriptive, not imperative: no bullet is led by a component label or an "add X" verb.
CHANGELOG = """\
Under chunked prefill with the pool near capacity, a freed slot could be handed to another request while the
previous batch still read its row: silent cache corruption.

Fix by keeping slot ownership across batches:

- SlotPool.alloc(reqs) now treats requests that already hold a slot as in-place reuse and is atomic.
- SlotPool.free(req) is request-aware; it clears req.slot so a stale value cannot leak.
- The explicit free in Scheduler.get_next_batch_to_run is removed.
- All call sites (Batch.alloc_req_slots, release_req) are switched to the request-aware API.
"""

# A real problem report: a traceback through the code, and the one function that misbehaves.
TRACEBACK = """\
Under chunked prefill with the pool near capacity, outputs are silently corrupted:

```
Traceback (most recent call last):
  File "pkg/managers/scheduler.py", line 300, in get_next_batch_to_run
  File "pkg/managers/batch.py", line 81, in alloc_req_slots
  File "pkg/managers/prefill.py", line 12, in prepare_for_extend
  File "pkg/managers/forward.py", line 40, in run_batch
AssertionError: row 3 already in flight
```

A slot that a chunked request still uses can be handed to another request. Requests should keep their slot
until they are released, and allocation should not hand out a slot in use.
"""


def test_a_changelog_that_maps_the_fix_leaks_it():
    sites = mapped_sites(CHANGELOG, ORACLE)
    assert {n for _, n in sites} == {"alloc", "free", "get_next_batch_to_run", "alloc_req_slots", "release_req"}
    # no verb-led or labelled steps: the map gives it away, and so do its change notes (`change_items`)
    assert "change notes" in (recipe_finding(CHANGELOG, ORACLE) or "")
    found = [f for f in leak_findings(CHANGELOG, ORACLE, TESTS) if f.startswith("statement maps the fix")]
    assert len(found) == 1 and "in 3 files" in found[0]
    assert finding_kind(found[0]) == "fix_map"


def test_a_statement_that_maps_the_fix_is_not_eligible():
    st = build_statement("fix: eliminate a slot race on chunked prefill", CHANGELOG, oracle_patch=ORACLE,
                         tests_patch=TESTS)
    result = eligibility(st, ORACLE, TESTS, 20)
    assert any(f.startswith("statement maps the fix") for f in result.quality.leaks), result.quality.leaks
    assert not result.quality.statement_eligible


def test_a_traceback_and_a_symptom_do_not_map_the_fix():
    # the traceback names two changed functions (and two the oracle does not touch), in two files
    assert mapped_sites(TRACEBACK, ORACLE) == []
    assert not [f for f in leak_findings(TRACEBACK, ORACLE, TESTS) if f.startswith("statement maps the fix")]


def test_plain_words_count_only_as_code():
    prose = ("Requests should free their slot only once, and alloc should hand out free slots only; "
             "see get_next_batch_to_run and alloc_req_slots and release_req.")
    # `free` and `alloc` are words here, not code: three sites, under the bar
    assert mapped_sites(prose, ORACLE) == []
    coded = prose + " `free` and `alloc` must agree."
    assert len(mapped_sites(coded, ORACLE)) == 5


def test_sites_in_one_file_or_in_the_requirements_are_no_map():
    one_file = "SlotPool.alloc(reqs) and SlotPool.free(req) disagree about who owns a slot; fix `SlotPool`."
    assert mapped_sites(one_file, ORACLE) == []  # where the bug is, not a map across the code
    required = ("Chunked prefill corrupts outputs near capacity.\n\n## Requirements\n\n- `SlotPool.alloc`, "
                "`SlotPool.free`, `Scheduler.get_next_batch_to_run`, `Batch.alloc_req_slots` and `release_req` "
                "keep a request's slot across batches.\n")
    assert mapped_sites(required, ORACLE) == []  # the Requirements say what must hold, by name


# A changelog whose bullets have no verb: each names a component the oracle changes (`alloc`, `scheduler`,
# `SlotPool`) and says what was done to it.
CHANGE_NOTES = """\
Slot handling on chunked prefill.

- per-request slot reuse in SlotPool.alloc (in-place for reqs already holding one)
- req-aware free in pool.py, clearing req.slot
- Scheduler.get_next_batch_to_run without the explicit free of the chunked request's slot
"""
# The same components named in a problem: what goes wrong, and what must hold.
SYMPTOMS = """\
Slots are handed out twice under chunked prefill.

- SlotPool.alloc hands a slot still in use to a second request, and outputs are corrupted
- after a chunked request finishes, the scheduler must release its slot exactly once
- `free` should accept the request that holds the slot
"""


def test_change_notes_without_a_verb_prescribe_the_change():
    from sweserve.dataset.leaks import change_items
    assert recipe_steps_none(CHANGE_NOTES)
    assert len(change_items(CHANGE_NOTES, ORACLE)) == 3
    found = recipe_finding(CHANGE_NOTES, ORACLE)
    assert found and found.startswith("statement prescribes the change") and "change notes" in found
    assert finding_kind(found) == "recipe"


def test_symptoms_and_requirements_naming_the_same_components_do_not():
    from sweserve.dataset.leaks import change_items
    assert change_items(SYMPTOMS, ORACLE) == []
    assert recipe_finding(SYMPTOMS, ORACLE) is None


def recipe_steps_none(text: str) -> bool:
    """Nothing the verb-led or labelled recipe rules read: only the change-notes rule can see it."""
    from sweserve.dataset.leaks import recipe_steps
    return recipe_steps(text, ORACLE) == []


# Hunks deep inside long methods: git's header names only the class (`@@ ... @@ class Worker:`), the `def` lies
# above the hunk's context. Only the base file says which method each hunk changes.
WORKER_BASE = "class Worker:\n" + "".join(
    f"    def {name}(self, batch):\n" + "".join(f"        step_{i} = batch.get({i})\n" for i in range(12))
    + "        return batch\n\n" for name in ("prepare_batch", "sync_outputs"))
POOL_BASE = "class Pool:\n" + "".join(
    f"    def {name}(self, req):\n" + "".join(f"        part_{i} = req.get({i})\n" for i in range(12))
    + "        return req\n\n" for name in ("alloc_slots", "release_slots"))
DEEP_ORACLE = "".join(
    f"diff --git a/pkg/{mod}.py b/pkg/{mod}.py\n--- a/pkg/{mod}.py\n+++ b/pkg/{mod}.py\n"
    + "".join(f"@@ -{start},3 +{start},3 @@ class {cls}:\n     {ctx}\n-        {var}_9 = {obj}.get(9)\n"
              f"+        {var}_9 = {obj}.get(9) or 0\n     {ctx}\n" for start in (10, 25))
    for mod, cls, var, obj, ctx in (("worker", "Worker", "step", "batch", "pass"), ("pool", "Pool", "part", "req", "pass")))
DEEP_CHANGELOG = ("Missing entries now default to zero.\n\n`prepare_batch` and `sync_outputs` read the ninth step "
                  "as zero when absent; `alloc_slots` and `release_slots` do the same for the ninth part.\n")


def test_the_fix_map_names_methods_by_the_base_files_lines():
    from sweserve import pyast
    from sweserve.dataset.gaps import enclosing_def
    bases = {"pkg/worker.py": WORKER_BASE, "pkg/pool.py": POOL_BASE}
    assert mapped_sites(DEEP_CHANGELOG, DEEP_ORACLE) == []  # the headers name two classes, the text neither
    sites = mapped_sites(DEEP_CHANGELOG, DEEP_ORACLE,
                         lambda path, line: enclosing_def(pyast.parse_module(bases[path]), line))
    assert {n for _, n in sites} == {"prepare_batch", "sync_outputs", "alloc_slots", "release_slots"}, sites
