"""The issue↔PR join, written once in the SQL both DuckDB and Spark SQL understand.

Inputs are two relations: ``entities`` (merged issues, pulls, comments, repos, git clones:
``kind, key, repo, number, merged, payload``) and ``facts`` (links, closing commits, PR
commits: ``kind, repo, number, ref_repo, ref_number, sha``). The only dialect difference is
the list aggregate (``list`` / ``collect_list``); list order is engine-dependent, so Python
sorts every list afterwards. ``closing`` is the SQL list of link kinds that close an issue.

Link-stage units are: each (PR, issue) candidate, each closing commit that no PR contains,
each issue no link points at, and each PR that links nothing.
"""

from __future__ import annotations

from typing import Literal

from swe_envs.mining.observations import COMMIT_REF_PREFIX, LINK_PREFIX

Dialect = Literal["duckdb", "spark"]
_AGG = {"duckdb": "list", "spark": "collect_list"}

LINK_FACTS = f"""
SELECT DISTINCT repo AS pr_repo, number AS pr_number, ref_repo AS issue_repo,
       ref_number AS issue_number, kind AS link_kind
FROM facts WHERE kind LIKE '{LINK_PREFIX}%'
UNION
SELECT DISTINCT pc.repo AS pr_repo, pc.number AS pr_number, cr.ref_repo AS issue_repo,
       cr.ref_number AS issue_number,
       CASE WHEN cr.kind = '{COMMIT_REF_PREFIX}timeline' THEN '{LINK_PREFIX}timeline_closed_by_commit'
            ELSE '{LINK_PREFIX}git_commit_message' END AS link_kind
FROM facts cr JOIN facts pc ON cr.repo = pc.repo AND cr.sha = pc.sha
WHERE cr.kind LIKE '{COMMIT_REF_PREFIX}%' AND pc.kind = 'pr_commit'
"""

CANDIDATES = """
SELECT pr_repo, pr_number, issue_repo, issue_number, {agg}(link_kind) AS link_kinds,
       max(CASE WHEN link_kind IN ({closing}) THEN 1 ELSE 0 END) AS closing
FROM link_facts GROUP BY pr_repo, pr_number, issue_repo, issue_number
"""

RESOLVED = """
SELECT c.pr_repo, c.pr_number, c.issue_repo, c.issue_number, c.link_kinds,
       CASE WHEN c.closing = 0 THEN 'non_closing_reference'
            WHEN ip.key IS NOT NULL THEN 'link_target_is_pull'
            WHEN i.key IS NULL THEN 'issue_not_observed'
            WHEN p.key IS NULL THEN 'pull_not_observed' END AS reason,
       i.payload AS issue, p.payload AS pull, p.merged AS merged
FROM candidates c
LEFT JOIN (SELECT key, repo, number, payload FROM entities WHERE kind = 'issue') i
       ON i.repo = c.issue_repo AND i.number = c.issue_number
LEFT JOIN (SELECT key, repo, number, payload, merged FROM entities WHERE kind = 'pull') p
       ON p.repo = c.pr_repo AND p.number = c.pr_number
LEFT JOIN (SELECT key, repo, number FROM entities WHERE kind = 'pull') ip
       ON ip.repo = c.issue_repo AND ip.number = c.issue_number
"""

LINK_REJECTS = f"""
SELECT concat(pr_repo, '#', CAST(pr_number AS STRING), '->', issue_repo, '#', CAST(issue_number AS STRING)) AS id,
       reason, issue AS issue, pull AS pull
FROM resolved WHERE reason IS NOT NULL
UNION ALL
SELECT concat('commit:', cr.repo, '@', cr.sha, '->', cr.ref_repo, '#', CAST(cr.ref_number AS STRING)) AS id,
       'closing_commit_without_pull' AS reason, NULL AS issue, NULL AS pull
FROM (SELECT DISTINCT repo, sha, ref_repo, ref_number FROM facts WHERE kind LIKE '{COMMIT_REF_PREFIX}%') cr
LEFT JOIN (SELECT DISTINCT repo, sha FROM facts WHERE kind = 'pr_commit') pc
       ON cr.repo = pc.repo AND cr.sha = pc.sha
WHERE pc.sha IS NULL
UNION ALL
SELECT concat('issue:', i.key) AS id, 'issue_without_linked_pr' AS reason, i.payload AS issue, NULL AS pull
FROM (SELECT key, repo, number, payload FROM entities WHERE kind = 'issue') i
LEFT JOIN (SELECT DISTINCT issue_repo, issue_number FROM link_facts) l
       ON l.issue_repo = i.repo AND l.issue_number = i.number
WHERE l.issue_repo IS NULL
UNION ALL
SELECT concat('pull:', p.key) AS id, 'pull_without_linked_issue' AS reason, NULL AS issue, p.payload AS pull
FROM (SELECT key, repo, number, payload FROM entities WHERE kind = 'pull') p
LEFT JOIN (SELECT DISTINCT pr_repo, pr_number FROM link_facts) l
       ON l.pr_repo = p.repo AND l.pr_number = p.number
WHERE l.pr_repo IS NULL
"""

PAIRS = """
WITH ok AS (SELECT * FROM resolved WHERE reason IS NULL),
per_issue AS (
  SELECT issue_repo, issue_number,
         {agg}(concat(pr_repo, '#', CAST(pr_number AS STRING))) AS issue_links,
         CAST(sum(CASE WHEN merged THEN 1 ELSE 0 END) AS BIGINT) AS merged_prs
  FROM ok GROUP BY issue_repo, issue_number),
per_pr AS (
  SELECT pr_repo, pr_number, {agg}(concat(issue_repo, '#', CAST(issue_number AS STRING))) AS pr_links
  FROM ok GROUP BY pr_repo, pr_number),
comments AS (
  SELECT repo, number, {agg}(payload) AS items FROM entities WHERE kind = 'comment' GROUP BY repo, number)
SELECT ok.pr_repo, ok.pr_number, ok.issue_repo, ok.issue_number, ok.link_kinds, ok.issue, ok.pull,
       pi.issue_links, pi.merged_prs, pp.pr_links, r.payload AS repo_meta, g.payload AS git_repo,
       ci.items AS issue_comments, cp.items AS pull_comments
FROM ok
JOIN per_issue pi ON pi.issue_repo = ok.issue_repo AND pi.issue_number = ok.issue_number
JOIN per_pr pp ON pp.pr_repo = ok.pr_repo AND pp.pr_number = ok.pr_number
LEFT JOIN (SELECT repo, payload FROM entities WHERE kind = 'repo') r ON r.repo = ok.pr_repo
LEFT JOIN (SELECT repo, payload FROM entities WHERE kind = 'gitrepo') g ON g.repo = ok.pr_repo
LEFT JOIN comments ci ON ci.repo = ok.issue_repo AND ci.number = ok.issue_number
LEFT JOIN comments cp ON cp.repo = ok.pr_repo AND cp.number = ok.pr_number
"""

# views, in dependency order; each engine registers them under these names
VIEWS = (("link_facts", LINK_FACTS), ("candidates", CANDIDATES), ("resolved", RESOLVED))


def render(sql: str, dialect: Dialect, closing_kinds: list[str]) -> str:
    closing = ", ".join(f"'{LINK_PREFIX}{k}'" for k in closing_kinds) or "''"
    return sql.replace("{agg}", _AGG[dialect]).replace("{closing}", closing)
