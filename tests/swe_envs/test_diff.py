"""swe_envs.diff: the one diff parser, as mining and the environments read a patch."""

from swe_envs.diff import header_paths, parse_diff, patch_paths, unquote_path

RENAME_AND_ADD = """diff --git a/pkg/old name.py b/pkg/new name.py
similarity index 90%
rename from pkg/old name.py
rename to pkg/new name.py
--- a/pkg/old name.py
+++ b/pkg/new name.py
@@ -1,2 +1,2 @@
-x = 1
+x = 2
 y = 3
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1,2 @@
+def test_x():
+    pass
"""


def test_per_file_status_paths_and_counts():
    renamed, added = parse_diff(RENAME_AND_ADD)
    assert (renamed.path, renamed.old_path, renamed.status) == ("pkg/new name.py", "pkg/old name.py", "renamed")
    assert (renamed.additions, renamed.deletions) == (1, 1)
    assert (added.path, added.old_path, added.status, added.additions) == ("tests/test_new.py", None, "added", 2)
    assert "".join(f.text for f in (renamed, added)) == RENAME_AND_ADD


def test_quoted_names_and_plain_unified_diffs():
    assert unquote_path('"a/tab\\there"') == "a/tab\there"
    assert header_paths('diff --git "a/caf\\303\\251" "b/caf\\303\\251"') == ("café", "café")
    assert patch_paths(RENAME_AND_ADD) == ["pkg/new name.py", "tests/test_new.py"]
    # no git header: the paths come from the +++ lines
    assert patch_paths("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n") == ["x.py"]
