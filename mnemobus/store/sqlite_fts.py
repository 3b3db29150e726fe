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
  join reads every row the words match in any group; the smaller of the two
  is chosen (see GROUP_TOKEN_RATIO). A group with no rows in a table is not
  searched at all.
"""

from __future__ import annotations

import hashlib
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
# With row counts: the group token is matched inside FTS5 unless the group holds more than this many rows per
# row the words match. Matching the token walks the group's doclist (~0.14 us a row); filtering on the join
# reads every matching row (~7 us each once the file outgrows the cache). Measured at 1M facts over 1,000
# groups: 21 ms -> 0.6 ms p50; a 100k-row group with a few hundred matches still filters on the join.
GROUP_TOKEN_RATIO = 50
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


def _group_has_rows(c: sqlite3.Connection, base: str, group_id: str) -> bool:
    return c.execute(f"SELECT 1 FROM {base} WHERE group_id = ? LIMIT 1", (group_id,)).fetchone() is not None


def fts_search(c: sqlite3.Connection, table: str, group_id: str, terms: Sequence[str], limit: int,
               where: str = "", params: dict[str, Any] | None = None, *, counts: TermCounts | None = None) -> list[Hit]:
    """BM25 over one FTS5 table, restricted to the group; `where` filters the base row `x` further.

    Without `counts` every word is searched and a bounded count of the rows
    they match decides how the group is applied (the plain FTS5 baseline the
    benchmarks compare against); with it, see the module docstring.
    """
    base = table.removesuffix("_fts")
    if limit <= 0 or terms_match(terms) is None:
        return []
    if counts is not None:
        if not _group_has_rows(c, base, group_id):
            return []
        terms, matching = counts.weighty(c, table, terms)
        by_token = counts.group_rows(c, table, group_id) <= GROUP_TOKEN_RATIO * matching
    else:
        matching = c.execute(
            f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)",
            (terms_match(terms), FTS_TERMS_ONLY_MAX_ROWS + 1),
        ).fetchone()[0]
        by_token = matching > FTS_TERMS_ONLY_MAX_ROWS
    words = terms_match(terms)
    if matching == 0 or words is None:
        return []
    expr = f"gtok : {group_token(group_id)} AND {words}" if by_token else words
    sql = (
        f"SELECT x.id, bm25({table}, 0.0, 1.0) AS r FROM {table} JOIN {base} x ON x.rowid = {table}.rowid"
        f" WHERE {table} MATCH :m AND +x.group_id = :g {where} ORDER BY r, x.id LIMIT :k"
    )
    rows = c.execute(sql, {"m": expr, "g": group_id, "k": limit, **(params or {})}).fetchall()
    return [Hit(r[0], -float(r[1])) for r in rows]
