from sweserve.dataset.patches import drop_paths, split_sections, touched_paths

PATCH = '''diff --git a/src/a.py b/src/a.py
index 1..2 100644
--- a/src/a.py
+++ b/src/a.py
@@ -1 +1 @@
-x
+y
diff --git a/test/test_a.py b/test/test_a.py
new file mode 100644
--- /dev/null
+++ b/test/test_a.py
@@ -0,0 +1 @@
+def test(): pass
diff --git a/old.py b/test/moved.py
similarity index 100%
rename from old.py
rename to test/moved.py
diff --git a/img.png b/img.png
new file mode 100644
index 0000000..1111111
GIT binary patch
literal 3
KcmZ>Y-~a#s3jh8A

literal 0
HcmV?d00001

diff --git "a/caf\\303\\251.py" "b/caf\\303\\251.py"
--- "a/caf\\303\\251.py"
+++ "b/caf\\303\\251.py"
@@ -1 +1 @@
-a
+b
'''


def test_sections_and_paths():
    assert len(split_sections(PATCH)) == 5
    assert touched_paths(PATCH) == {"src/a.py", "test/test_a.py", "old.py", "test/moved.py", "img.png", "café.py"}
    assert touched_paths("") == set()


def test_drop_paths_removes_whole_sections():
    kept, dropped = drop_paths(PATCH, lambda p: p.startswith("test/"))
    assert dropped == ["test/test_a.py", "test/moved.py"]  # the rename's section goes whole, old.py stays
    assert touched_paths(kept) == {"src/a.py", "img.png", "café.py"}
    assert kept.startswith("diff --git a/src/a.py") and "GIT binary patch" in kept


def test_interpreter_hooks_are_recognised_anywhere():
    from sweserve.dataset.patches import is_interpreter_hook

    for path in ("python/sitecustomize.py", "usercustomize.py", "a/b/conftest.py", "python/evil.pth"):
        assert is_interpreter_hook(path)
    for path in ("python/sglang/srt/sampler.py", "docs/conftest.md", "sitecustomize.py.bak"):
        assert not is_interpreter_hook(path)
