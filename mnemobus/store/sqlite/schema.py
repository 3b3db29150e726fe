"""The file's tables and the steps that bring a file written by an older mnemobus up to them."""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 8  # 2: fact rows stamped with their group's version (graph.py); 3: aliases keyed by type;
# 4: an episode keeps its speaker and name; 6: communities and per-group upkeep (communities.py); 7: eviction
# totals and promoted memories (lifecycle.py); 8: a fact's qualifier (add_fact_qualifier)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes(
  id TEXT PRIMARY KEY, group_id TEXT NOT NULL, content TEXT NOT NULL, role TEXT NOT NULL,
  source_message_id TEXT NOT NULL, reference_time REAL NOT NULL, response TEXT, agent_id TEXT,
  platform TEXT, channel_id TEXT, created_at REAL NOT NULL, screened INTEGER NOT NULL DEFAULT 0,
  embedding BLOB, speaker TEXT, name TEXT);
CREATE INDEX IF NOT EXISTS episodes_group_time ON episodes(group_id, reference_time);
-- rowid order within a group: the vector cache asks for a group's newest row on every search (O(log n) here,
-- a scan of the whole group through episodes_group_time: 84 µs at 1k episodes, growing linearly)
CREATE INDEX IF NOT EXISTS episodes_group ON episodes(group_id);
-- the turns said around a recalled message (TURNS in store.py): one seek to the nearest turn of the channel on
-- each side, then `span` rows. On an expression only that read names, so no other read of a group picks it: a
-- plain (group_id, channel_id, ...) index was taken for the vector cache's max(rowid) and walked the whole group
CREATE INDEX IF NOT EXISTS episodes_turns ON episodes((group_id || ''), channel_id, reference_time, id);
-- the mentions graph recall reads (MENTIONS in store.py): group and time beside the id, so a mention is one index
-- seek, not a seek and then a table row (the row holds the turn's text and vector): 3.0-3.3 -> 1.3 ms CPU for 50
-- entities at 100k turns. Built at the next open of an older file (0.6 s at 100k turns)
CREATE INDEX IF NOT EXISTS episodes_mentioned ON episodes(id, group_id, reference_time);
CREATE TABLE IF NOT EXISTS entities(
  id TEXT PRIMARY KEY, group_id TEXT NOT NULL, name TEXT NOT NULL, canonical_name TEXT NOT NULL,
  type TEXT NOT NULL, summary TEXT NOT NULL DEFAULT '', confidence REAL NOT NULL,
  first_seen REAL, last_seen REAL, embedding BLOB);
CREATE INDEX IF NOT EXISTS entities_group ON entities(group_id);
CREATE TABLE IF NOT EXISTS aliases(
  group_id TEXT NOT NULL, alias TEXT NOT NULL, type TEXT NOT NULL, entity_id TEXT NOT NULL,
  PRIMARY KEY(group_id, alias, type)) WITHOUT ROWID;  -- one entity per alias and type (see add_alias_types)
CREATE INDEX IF NOT EXISTS aliases_entity ON aliases(entity_id);
CREATE TABLE IF NOT EXISTS facts(
  id TEXT PRIMARY KEY, group_id TEXT NOT NULL, subject_id TEXT NOT NULL, object_id TEXT NOT NULL,
  relation TEXT NOT NULL, edge_type TEXT NOT NULL, fact TEXT NOT NULL, confidence REAL NOT NULL,
  valid_at REAL, invalid_at REAL, created_at REAL NOT NULL, expired_at REAL, superseded_by TEXT,
  last_seen REAL, retrieval_count INTEGER NOT NULL DEFAULT 0, embedding BLOB,
  ver INTEGER NOT NULL DEFAULT 0);  -- see graph.py
CREATE INDEX IF NOT EXISTS facts_group ON facts(group_id);
CREATE INDEX IF NOT EXISTS facts_subject ON facts(subject_id, relation);
CREATE INDEX IF NOT EXISTS facts_object ON facts(object_id);
CREATE TABLE IF NOT EXISTS fact_sources(
  fact_id TEXT NOT NULL, episode_id TEXT NOT NULL, source_message_id TEXT NOT NULL,
  PRIMARY KEY(fact_id, episode_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS fact_sources_episode ON fact_sources(episode_id);
CREATE TABLE IF NOT EXISTS episode_entities(
  episode_id TEXT NOT NULL, entity_id TEXT NOT NULL, PRIMARY KEY(episode_id, entity_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS episode_entities_entity ON episode_entities(entity_id);
CREATE VIRTUAL TABLE IF NOT EXISTS episodes_fts USING fts5(gtok, body, tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS entities_fts USING fts5(gtok, body, tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS facts_fts USING fts5(gtok, body, tokenize='porter unicode61 remove_diacritics 2');
"""


def add_episode_speaker(conn: sqlite3.Connection) -> None:
    """Schema 4: an episode keeps who said it and the name it was given, so it can be shown as it was sent."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(episodes)")}
    with conn:
        for column in ("speaker", "name"):
            if column not in have:
                conn.execute(f"ALTER TABLE episodes ADD COLUMN {column} TEXT")


def add_fact_qualifier(conn: sqlite3.Connection) -> None:
    """Schema 8: a fact keeps what its value holds for ("ramipril" for "hypertension"): a relation one value
    per qualifier ends only the old value of the same one. A file from before gets the column, every fact none."""
    if "qualifier" not in {row[1] for row in conn.execute("PRAGMA table_info(facts)")}:
        with conn:
            conn.execute("ALTER TABLE facts ADD COLUMN qualifier TEXT")


def add_alias_types(conn: sqlite3.Connection) -> None:
    """Schema 3: an alias is unique per type, not per group (Jordan the place and Jordan the person). A file from
    before gets the column, each alias the type of its entity."""
    if "type" in {row[1] for row in conn.execute("PRAGMA table_info(aliases)")}:
        return
    with conn:
        conn.executescript("""
            CREATE TABLE aliases_typed(
              group_id TEXT NOT NULL, alias TEXT NOT NULL, type TEXT NOT NULL, entity_id TEXT NOT NULL,
              PRIMARY KEY(group_id, alias, type)) WITHOUT ROWID;
            INSERT INTO aliases_typed SELECT a.group_id, a.alias, coalesce(e.type, 'thing'), a.entity_id
              FROM aliases a LEFT JOIN entities e ON e.id = a.entity_id;
            DROP TABLE aliases;
            ALTER TABLE aliases_typed RENAME TO aliases;
            CREATE INDEX IF NOT EXISTS aliases_entity ON aliases(entity_id);
        """)
