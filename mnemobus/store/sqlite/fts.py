"""Full-text search for the SQLite store: BM25 over FTS5 tables that hold every group, restricted to one.

Two costs dominate a text search on conversational data, and both are
avoided here rather than paid on every recall:

- Common words. FTS5's bm25() computes each phrase's IDF by walking its
  whole doclist, so a query word found in most rows ("work", "like") costs
  a scan of the table, while FTS5's own formula, log((N - n + 0.5) / (n + 0.5))
  clamped to ~0, gives a word in half the rows or more no weight at all.
  `TermCounts` keeps each word's row count (cached for a minute) and such
  words are left out of the query: the same ranking among the rows that have
  evidence, without the tail FTS5 would order by noise, for a fraction of the work.
- The group. Matching the group's token inside FTS5 walks the group's whole
  doclist for its IDF (14 ms at 100k facts), while applying the group on the
  base rows reads rows the words match in other groups too; a cost model over cached
  row counts picks the cheaper (`_ranked_then_read`). A group with no rows in
  a table is not searched at all.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

from mnemobus.store.contract import Hit

# Without row counts (the plain baseline): above this many matching rows (over all groups) a text search narrows
# by the group token inside FTS5; below it, it matches the terms alone and filters by group on the join. Both
# give the same ranking, since the group token's column weighs nothing in bm25().
FTS_TERMS_ONLY_MAX_ROWS = 20_000
# With row counts the cheaper way by a cost model (`_ranked_then_read`); this scales the token's estimate:
# 0 always applies the group on the reads, a huge number always inside FTS5 (tests check both rank alike).
GROUP_TOKEN_BIAS = 1.0
# Below this many rows in a table every word is searched: common-word pruning only pays at scale, and small
# stores (tests, new users) then rank exactly as the other backend does.
PRUNE_MIN_ROWS = 1_000


def group_token(group_id: str) -> str:
    """A digits-only FTS token per group: the tokenizer and stemmer leave it intact, so it filters exactly."""
    return "g" + str(int(hashlib.sha256(group_id.encode()).hexdigest()[:15], 16))


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def terms_match(terms: Sequence[str]) -> str | None:
    """An FTS5 expression matching any of the terms, each quoted so no term is syntax."""
    quoted = [_phrase(t) for t in terms if t.strip()]
    if not quoted:
        return None
    return f'body : ({" OR ".join(quoted)})'


class TermCounts:
    """Rows per word in each FTS table, and rows per table, remembered for `ttl_s`.

    Counts only steer which words are searched and how the group is applied;
    a stale count costs speed, never a wrong answer about which group a row is
    in. Thread-safe: reader threads share it.
    """

    def __init__(self, ttl_s: float = 60.0, max_entries: int = 50_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._counts: dict[tuple[str, str], tuple[int, float]] = {}
        self._lock = threading.Lock()

    def _cached(self, key: tuple[str, str], compute: Any) -> int:
        now = time.monotonic()
        with self._lock:
            hit = self._counts.get(key)
        if hit is not None and now - hit[1] < self.ttl_s:
            return hit[0]
        value = int(compute())
        with self._lock:
            if len(self._counts) >= self.max_entries:
                self._counts.clear()
            self._counts[key] = (value, now)
        return value

    def table_rows(self, c: sqlite3.Connection, table: str) -> int:
        base = table.removesuffix("_fts")
        return self._cached((table, ""), lambda: c.execute(f"SELECT count(*) FROM {base}").fetchone()[0])

    def group_rows(self, c: sqlite3.Connection, table: str, group_id: str) -> int:
        base = table.removesuffix("_fts")
        sql = f"SELECT count(*) FROM {base} WHERE group_id = ?"
        return self._cached((table, "\x00" + group_id), lambda: c.execute(sql, (group_id,)).fetchone()[0])

    def term_rows(self, c: sqlite3.Connection, table: str, term: str, cap: int) -> int:
        """Rows the word matches, counted up to `cap` (enough to tell a weightless word)."""
        sql = f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)"
        return self._cached((table, term), lambda: c.execute(sql, (f"body : {_phrase(term)}", cap)).fetchone()[0])

    def weighty(self, c: sqlite3.Connection, table: str, terms: Sequence[str]) -> tuple[list[str], int]:
        """The words worth searching, and an upper bound on the rows they match together."""
        terms = [t for t in terms if t.strip()]
        total = self.table_rows(c, table)
        cap = total // 2 + 1
        counted = [(t, self.term_rows(c, table, t, cap)) for t in terms]
        counted = [(t, n) for t, n in counted if n > 0]
        if total >= PRUNE_MIN_ROWS:  # a query of common words only has no text evidence: vectors and the graph answer it
            counted = [(t, n) for t, n in counted if n * 2 < total]
        return [t for t, _ in counted], sum(n for _, n in counted)


Ranked = dict[tuple[Any, ...], list[Any]]  # a group-free statement's rows by its text and parameters, one snapshot


def _ranked(c: sqlite3.Connection, sql: str, params: tuple[Any, ...] | dict[str, Any],
            shared: Ranked | None) -> list[Any]:
    """The rows of a statement that names no group, over tables that hold every group: within one read snapshot
    each of a recall's groups would get the very same rows, so the run asks once (`shared`, the run's memo;
    None: ask). Which of them are a group's own is picked per group from what was read (`_kept`)."""
    if shared is None:
        return c.execute(sql, params).fetchall()
    key = (sql, *(params if isinstance(params, tuple) else sorted(params.items())))
    rows = shared.get(key)
    if rows is None:
        rows = shared[key] = c.execute(sql, params).fetchall()
    return rows


def _kept(c: sqlite3.Connection, base: str, rowids: list[int], group_id: str, where: str, params: dict[str, Any],
          shared: Ranked | None) -> list[tuple[int, str]]:
    """Of the ranked rows, the group's own that pass `where`, as (rowid, id). The rows are read with their group
    and the group is applied here: the read is then the same for every group of a snapshot that ranked the same
    rows (`_ranked`), and a row of another group is read once either way (the filter was on the read row)."""
    # the rowids as one JSON parameter: a widened cut can pass SQLite's variable limit
    rows = _ranked(c, f"SELECT x.rowid, x.id, x.group_id FROM {base} x"
                   f" WHERE x.rowid IN (SELECT value FROM json_each(:rowids)) {where}",
                   {"rowids": json.dumps(rowids), **params}, shared)
    return [(rowid, ident) for rowid, ident, group in rows if group == group_id]


def _group_has_rows(c: sqlite3.Connection, base: str, group_id: str) -> bool:
    return c.execute(f"SELECT 1 FROM {base} WHERE group_id = ? LIMIT 1", (group_id,)).fetchone() is not None


def fts_search(c: sqlite3.Connection, table: str, group_id: str, terms: Sequence[str], limit: int,
               where: str = "", params: dict[str, Any] | None = None, *, counts: TermCounts | None = None,
               has_rows: bool | None = None, shared: Ranked | None = None) -> list[Hit]:
    """BM25 over one FTS5 table, restricted to the group; `where` filters the base row `x` further.

    Without `counts` every word is searched in one query whose join reads
    every matching row, and a bounded count of the rows they match decides
    how the group is applied: the plain FTS5 baseline the benchmarks compare
    against. With it, see `_ranked_then_read`. `has_rows`: whether the group has a row in the table, when the
    caller's snapshot already read it (`group_state.py`). `shared`: the read snapshot's memo of group-free
    rankings (`_ranked`), so the groups of one recall rank the same words once.
    """
    base = table.removesuffix("_fts")
    if limit <= 0 or terms_match(terms) is None:
        return []
    if counts is not None:
        if not (has_rows if has_rows is not None else _group_has_rows(c, base, group_id)):
            return []
        return _ranked_then_read(c, table, group_id, terms, limit, where, params or {}, counts, shared)
    matching = c.execute(
        f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)",
        (terms_match(terms), FTS_TERMS_ONLY_MAX_ROWS + 1),
    ).fetchone()[0]
    words = terms_match(terms)
    if matching == 0 or words is None:
        return []
    expr = f"gtok : {group_token(group_id)} AND {words}" if matching > FTS_TERMS_ONLY_MAX_ROWS else words
    sql = (
        f"SELECT x.id, bm25({table}, 0.0, 1.0) AS r FROM {table} JOIN {base} x ON x.rowid = {table}.rowid"
        f" WHERE {table} MATCH :m AND +x.group_id = :g {where} ORDER BY r, x.id LIMIT :k"
    )
    rows = c.execute(sql, {"m": expr, "g": group_id, "k": limit, **(params or {})}).fetchall()
    return [Hit(r[0], -float(r[1])) for r in rows]


# cost model (microseconds, measured on 2 cores; docs/performance.md) for choosing how to apply the group
_US_PER_GROUP_ROW = 0.14  # walking the group token's doclist for its IDF
_US_PER_MATCH = 0.5  # ranking one matching row inside FTS5
_US_PER_ROW_READ = 5.0  # reading one base row (group, validity) by rowid


def _ranked_then_read(c: sqlite3.Connection, table: str, group_id: str, terms: Sequence[str], limit: int,
                      where: str, params: dict[str, Any], counts: TermCounts, shared: Ranked | None = None,
                      ) -> list[Hit]:
    """Rank inside FTS5 first, then read only the best rows: a join reads every matching row before it can sort.

    The words that carry weight are ranked by bm25() alone; only the best few
    rowids are read from the base table to check the group and `where`, and
    the cut widens (x4) while too few survive. The group is applied inside
    FTS5 (its token ANDed in: costs a walk of the group's rows) or on those
    reads (costs reading rows of other groups too), whichever the row counts
    say is cheaper (the cost model above; figures in docs/performance.md).
    """
    base = table.removesuffix("_fts")
    terms, matching = counts.weighty(c, table, terms)
    words = terms_match(terms)
    if matching == 0 or words is None:
        return []
    if (found := _rare_first(c, table, group_id, terms, limit, where, params, counts, shared)) is not None:
        return found
    group_rows = counts.group_rows(c, table, group_id)
    share = max(group_rows / max(counts.table_rows(c, table), 1), 1e-6)  # of the matches, the group's likely part
    wanted = 2 * limit
    read_if_terms = min(matching, math.ceil(wanted / share))
    cost_terms = matching * _US_PER_MATCH + read_if_terms * _US_PER_ROW_READ
    cost_token = group_rows * _US_PER_GROUP_ROW + min(matching, group_rows) * _US_PER_MATCH + wanted * _US_PER_ROW_READ
    by_token = cost_token < cost_terms * GROUP_TOKEN_BIAS
    expr = f"gtok : {group_token(group_id)} AND {words}" if by_token else words
    cut = wanted if by_token else read_if_terms
    ranking = f"SELECT rowid, bm25({table}, 0.0, 1.0) FROM {table} WHERE {table} MATCH ? ORDER BY 2 LIMIT ?"
    while True:
        # a row past the cut is asked for: when it does not come, the cut held every match, and a group whose share
        # of them is short of `limit` is answered without ranking them again under a wider cut (a name in one row
        # of each of two groups was ranked twice a search)
        ranked = _ranked(c, ranking, (expr, cut + 1), shared)  # by the words alone it is every group's: shared
        if not ranked:
            return []
        score = dict(ranked)
        kept = _kept(c, base, [rowid for rowid, _ in ranked], group_id, where, params, shared)
        hits = sorted(((score[rowid], ident) for rowid, ident in kept))
        if len(hits) >= limit or len(ranked) <= cut:
            return [Hit(ident, -float(r)) for r, ident in hits[:limit]]
        cut *= 4


COMMON_ROWS = 1_000  # a word in more rows than this is costly to rank: scored only beside rarer words
RARE_BUDGET = 5_000  # rows the rarer words may match for the shortcut to be worth it


def _idf(rows: int, hits: int) -> float:
    """FTS5's IDF: log((N - n + 0.5) / (n + 0.5)), never below 1e-6."""
    return max(math.log((rows - hits + 0.5) / (hits + 0.5)), 1e-6)


def _rare_first(c: sqlite3.Connection, table: str, group_id: str, terms: Sequence[str], limit: int,
                where: str, params: dict[str, Any], counts: TermCounts, shared: Ranked | None = None,
                ) -> list[Hit] | None:
    """The rows holding the query's rare words, exactly scored, without ranking every row a common word matches.

    For when the query has rare words and common ones of less than half their IDF ("vopefosi studies":
    8.4 against 1.95). Every row holding a rare word gets its exact bm25(): from `rare AND common` when
    it holds a common word too (each phrase once: the score the whole query gives it), else from `rare`
    alone (the common words add nothing to it). Rows holding only the common words are left out: they
    are the tail bm25 orders by document length, evidence of nothing the rare words did not find.
    None when the rare words find no row of the group (then everything is ranked).
    """
    base = table.removesuffix("_fts")
    total = counts.table_rows(c, table)
    rows = {t: counts.term_rows(c, table, t, total // 2 + 1) for t in terms}
    rare = [t for t in terms if rows[t] <= COMMON_ROWS]
    common = [t for t in terms if rows[t] > COMMON_ROWS]
    if not rare or not common or sum(rows[t] for t in rare) > RARE_BUDGET:
        return None
    if max(_idf(total, rows[t]) for t in common) >= 0.5 * min(_idf(total, rows[t]) for t in rare):
        return None
    rare_expr, common_expr = terms_match(rare), terms_match(common)
    sql = f"SELECT rowid, bm25({table}, 0.0, 1.0) FROM {table} WHERE {table} MATCH ?"
    score = dict(_ranked(c, sql, (rare_expr,), shared))  # neither names the group: shared within the snapshot
    score.update(_ranked(c, sql, (f"{rare_expr} AND {common_expr}",), shared))
    ranked = sorted((r, rowid) for rowid, r in score.items())
    hits: list[tuple[float, str]] = []
    for start in range(0, len(ranked), 4 * limit):
        chunk = ranked[start : start + 4 * limit]
        by_rowid = {rowid: r for r, rowid in chunk}
        hits += [(by_rowid[rowid], ident) for rowid, ident in _kept(c, base, list(by_rowid), group_id, where, params,
                                                                      shared)]
        if len(hits) >= limit:
            break
    return [Hit(ident, -float(r)) for r, ident in sorted(hits)[:limit]] if hits else None
