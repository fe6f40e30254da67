from samples.swe_mine.gitrepo import commit_files, git, init_repo, merge_pr
from swe_envs.git import GitRepo, RepoCache
from swe_envs.mining.config import GitScanConfig, PatchFilterConfig, RelevantFilesConfig
from swe_envs.mining.git_history import scan_repo
from swe_envs.mining.imports import FileIndex, imported_paths
from swe_envs.mining.observations import Bad
from swe_envs.mining.patches import obtain_patch
from swe_envs.mining.relevant_files import select_relevant_files

ISSUE = "The `render_table` helper in the report module ignores the column widths passed by TableStyle."


def _repo(tmp_path):
    repo = init_repo(tmp_path / "r", "acme/reports")
    files = {
        "reports/__init__.py": "",
        "reports/report.py": "from reports.style import TableStyle\nfrom . import widths\n\n\ndef render_table(rows, style=None):\n"
        "    style = style or TableStyle()\n    return [r for r in rows]\n",
        "reports/style.py": "class TableStyle:\n    column_widths = None\n",
        "reports/widths.py": "def compute(rows):\n    return [len(r) for r in rows]\n",
        "reports/cli.py": "from reports.report import render_table\n\n\ndef main():\n    print(render_table([]))\n",
        "reports/unrelated.py": "def spam():\n    return 'eggs'\n",
        "docs/table_style_notes.py": "# TableStyle column_widths render_table notes\nNOTES = 'column widths of TableStyle'\n",
        "vendor/huge.py": "x = 1\n" * 50_000,
        "tests/test_report.py": "from reports.report import render_table\n\n\ndef test_render():\n    assert render_table([]) == []\n",
    }
    commit_files(repo, files, "Initial", "2021-01-01T00:00:00Z")
    for i in range(3):  # style.py keeps changing together with report.py
        commit_files(
            repo,
            {
                "reports/report.py": files["reports/report.py"] + f"# v{i}\n",
                "reports/style.py": files["reports/style.py"] + f"# v{i}\n",
            },
            f"Tweak {i}",
            f"2021-01-0{i + 2}T00:00:00Z",
        )
    git(repo, "checkout", "-q", "-b", "fix")
    commit_files(
        repo,
        {
            "reports/report.py": files["reports/report.py"].replace("rows]", "rows if r]"),
            "tests/test_report.py": files["tests/test_report.py"] + "\n\ndef test_widths():\n    pass\n",
        },
        "Honour widths\n\nFixes #1",
        "2021-02-01T00:00:00Z",
    )
    merge_pr(repo, "fix", 2, "dev", "Honour widths", "2021-02-02T00:00:00Z")
    return repo


def _repo_and_patch(tmp_path):
    """The test repository and the patch of its one mined pull request."""
    repo = _repo(tmp_path)
    pull = next(
        o.payload
        for _, r in scan_repo(repo, tmp_path, GitScanConfig())
        if not isinstance(r, Bad)
        for o in r
        if o.kind == "pull"
    )
    with RepoCache() as repos:
        return repo, obtain_patch(pull, None, PatchFilterConfig(), repos)


def test_touched_then_related_within_budget(tmp_path):
    repo, patch = _repo_and_patch(tmp_path)
    cfg = RelevantFilesConfig(token_budget=400, max_file_bytes=100_000)
    sel = select_relevant_files(GitRepo(repo), patch.base_commit, patch.files, ISSUE, cfg)
    listed = {f["path"]: f for f in sel.meta["files"]}
    paths = [p for p, _ in sel.files]
    assert paths[:2] == ["reports/report.py", "tests/test_report.py"]  # touched first, in patch order
    assert listed["reports/report.py"]["reason"] == "touched"
    assert listed["reports/style.py"]["reason"] == "imports"
    assert listed["reports/widths.py"]["reason"] == "imports"  # `from . import widths`
    assert listed["reports/cli.py"]["reason"] == "imported_by"
    assert "reports/unrelated.py" not in paths or listed["reports/unrelated.py"]["reason"] == "same_dir"
    assert "vendor/huge.py" not in paths  # over max_file_bytes: never a candidate
    # contents are the pre-change ones
    assert dict(sel.files)["reports/report.py"].endswith("return [r for r in rows]\n# v2\n")
    assert sel.meta["used_tokens"] <= cfg.token_budget
    assert sel.meta["used_tokens"] == sum(f["tokens"] for f in sel.meta["files"])
    assert sel.meta["method"].startswith("touched+imports") and sel.meta["budget_tokens"] == 400
    scores = [f["score"] for f in sel.meta["files"] if f["reason"] != "touched"]
    assert scores == sorted(scores, reverse=True)
    tiny = select_relevant_files(
        GitRepo(repo), patch.base_commit, patch.files, ISSUE, RelevantFilesConfig(token_budget=30)
    )
    assert tiny.meta["used_tokens"] <= 30 and tiny.meta["files"][0]["truncated"] is True
    assert all(f["reason"] == "touched" for f in tiny.meta["files"])


def test_cochange_and_lexical_evidence(tmp_path):
    repo, patch = _repo_and_patch(tmp_path)
    only_history = RelevantFilesConfig(
        weight_imports=0, weight_imported_by=0, weight_lexical=0, weight_same_dir=0
    )
    sel = select_relevant_files(GitRepo(repo), patch.base_commit, patch.files, ISSUE, only_history)
    assert [f["path"] for f in sel.meta["files"] if f["reason"] != "touched"] == ["reports/style.py"]
    only_words = RelevantFilesConfig(
        weight_imports=0, weight_imported_by=0, weight_cochange=0, weight_same_dir=0
    )
    sel = select_relevant_files(GitRepo(repo), patch.base_commit, patch.files, ISSUE, only_words)
    related = [f["path"] for f in sel.meta["files"] if f["reason"] != "touched"]
    assert related[0] == "docs/table_style_notes.py" and all(
        f["reason"] == "lexical" for f in sel.meta["files"][2:]
    )


def test_imports_per_language():
    idx = FileIndex(
        [
            "src/app/util.js",
            "src/app/index.ts",
            "src/app/views/list.tsx",
            "cmd/server/main.go",
            "internal/db/db.go",
            "internal/db/db_test.go",
            "src/main/java/com/acme/Store.java",
            "src/main/java/com/acme/Cart.java",
            "include/acme/buf.h",
            "src/buf.c",
            "src/lib.rs",
            "src/net/mod.rs",
            "src/net/tcp.rs",
            "lib/acme/cart.rb",
            "lib/acme/store.rb",
            "src/Acme/Store.php",
            "src/Acme/Cart.php",
            "pkg/a.py",
            "pkg/sub/b.py",
            "pkg/sub/__init__.py",
        ]
    )
    assert imported_paths(
        "src/app/index.ts", "import {x} from './util'\nconst v = require('./views/list')", idx
    ) == {"src/app/util.js", "src/app/views/list.tsx"}
    assert imported_paths(
        "cmd/server/main.go", 'import (\n  "fmt"\n  db "github.com/acme/x/internal/db"\n)', idx
    ) == {"internal/db/db.go"}
    assert imported_paths("src/main/java/com/acme/Cart.java", "import com.acme.Store;\n", idx) == {
        "src/main/java/com/acme/Store.java"
    }
    assert imported_paths("src/buf.c", '#include "acme/buf.h"\n#include <stdio.h>\n', idx) == {
        "include/acme/buf.h"
    }
    assert imported_paths("src/lib.rs", "mod net;\nuse crate::net::tcp;\n", idx) == {
        "src/net/mod.rs",
        "src/net/tcp.rs",
    }
    assert imported_paths("lib/acme/cart.rb", "require_relative 'store'\n", idx) == {"lib/acme/store.rb"}
    assert imported_paths("src/Acme/Cart.php", "<?php\nuse Acme\\Store;\n", idx) == {"src/Acme/Store.php"}
    assert imported_paths("pkg/a.py", "from pkg.sub import b\nimport os\n", idx) == {
        "pkg/sub/__init__.py",
        "pkg/sub/b.py",
    }
    assert imported_paths("pkg/sub/b.py", "from .. import a\n", idx) == {"pkg/a.py"}
