"""The statements the Neo4j store sends: constant text, never built from data; rows travel as parameters."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from neo4j import exceptions as nx


SCHEMA: tuple[str, ...] = (
    "CREATE CONSTRAINT mb_episode_id IF NOT EXISTS FOR (n:Episode) REQUIRE n.id IS UNIQUE",
    "CREATE CONSTRAINT mb_entity_id IF NOT EXISTS FOR (n:Entity) REQUIRE n.id IS UNIQUE",
    "CREATE CONSTRAINT mb_fact_id IF NOT EXISTS FOR ()-[r:FACT]-() REQUIRE r.id IS UNIQUE",
    # one entity per alias and type (before issue 23: per alias; _ensure_schema moves a store over)
    "CREATE CONSTRAINT mb_alias_typed_key IF NOT EXISTS FOR (n:Alias) REQUIRE (n.group_id, n.key, n.type) IS UNIQUE",
    "CREATE INDEX mb_episode_group IF NOT EXISTS FOR (n:Episode) ON (n.group_id, n.reference_time)",
    # a composite index serves only a query that names all its properties: without this one, every
    # (n:Episode {group_id: $g}) read scanned all episodes of all groups (PROFILE: 40,002 db hits for a group of 800)
    "CREATE INDEX mb_episode_by_group IF NOT EXISTS FOR (n:Episode) ON (n.group_id)",
    "CREATE INDEX mb_entity_group IF NOT EXISTS FOR (n:Entity) ON (n.group_id)",
    "CREATE INDEX mb_fact_group IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.group_id)",
    "CREATE INDEX mb_fact_subject IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.subject_id)",
    # a fact chain (subject and relation): the speaker of a busy group is the subject of thousands of facts
    "CREATE INDEX mb_fact_chain IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.subject_id, r.relation)",
    # the in-process mirrors (mirror.py): one version node per group, and rows stamped with the version
    # that last wrote them, so a mirror reads only what changed since it last looked
    "CREATE CONSTRAINT mb_group_version IF NOT EXISTS FOR (n:GroupVersion) REQUIRE n.group_id IS UNIQUE",
    # erasures (erasure.py): each group's count of erasures, which outlives the group, and the journal of one
    "CREATE CONSTRAINT mb_group_erasure IF NOT EXISTS FOR (n:GroupErasure) REQUIRE n.group_id IS UNIQUE",
    "CREATE CONSTRAINT mb_erasure_id IF NOT EXISTS FOR (n:Erasure) REQUIRE n.id IS UNIQUE",
    "CREATE INDEX mb_fact_ver IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.group_id, r.ver)",
    "CREATE INDEX mb_entity_ver IF NOT EXISTS FOR (n:Entity) ON (n.group_id, n.ver)",
    "CREATE INDEX mb_episode_ver IF NOT EXISTS FOR (n:Episode) ON (n.group_id, n.ver)",
    "CREATE FULLTEXT INDEX mb_fact_text IF NOT EXISTS FOR ()-[r:FACT]-() "
    "ON EACH [r.fact, r.subject_name, r.relation_text, r.object_name, r.gk] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
    "CREATE FULLTEXT INDEX mb_entity_text IF NOT EXISTS FOR (n:Entity) "
    "ON EACH [n.name, n.canonical_name, n.alias_text, n.gk] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
    "CREATE FULLTEXT INDEX mb_episode_text IF NOT EXISTS FOR (n:Episode) "
    "ON EACH [n.content, n.response, n.gk] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
    "CREATE VECTOR INDEX mb_fact_vec IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.embedding) "
    "OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}",
    "CREATE VECTOR INDEX mb_entity_vec IF NOT EXISTS FOR (n:Entity) ON (n.embedding) "
    "OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}",
    "CREATE VECTOR INDEX mb_episode_vec IF NOT EXISTS FOR (n:Episode) ON (n.embedding) "
    "OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}",
    # a group's life-cycle (lifecycle.py): promoted memories, eviction totals
    "CREATE CONSTRAINT mb_promoted_id IF NOT EXISTS FOR (n:Promoted) REQUIRE n.id IS UNIQUE",
    "CREATE INDEX mb_promoted_group IF NOT EXISTS FOR (n:Promoted) ON (n.group_id)",
    "CREATE CONSTRAINT mb_retention_group IF NOT EXISTS FOR (n:Retention) REQUIRE n.group_id IS UNIQUE",
)
SCHEMA_NAMES = frozenset(re.search(r"(?:CONSTRAINT|INDEX) (\w+)", q).group(1) for q in SCHEMA)  # type: ignore[union-attr]

RETRYABLE = (nx.ServiceUnavailable, nx.SessionExpired, nx.TransientError)
TRANSIENT = (nx.ServiceUnavailable, nx.SessionExpired, nx.TransientError, nx.DriverError, OSError)

# Cypher fragments (constants, never data)
VALID_AT = "(r.valid_at IS NULL OR r.valid_at <= $as_of) AND (r.invalid_at IS NULL OR $as_of < r.invalid_at)"
# Explicit projections: `{.*}` would load the 384-float embedding of every row (3 KiB each,
# the bulk of the store) just to drop it, which at 100k facts pushes hot rows out of the page cache.
FACT_PROPS = (
    "id", "group_id", "subject_id", "object_id", "subject_name", "object_name", "relation", "edge_type", "fact",
    "confidence", "valid_at", "invalid_at", "created_at", "expired_at", "superseded_by", "last_seen",
    "episode_ids", "source_message_ids", "retrieval_count", "qualifier",
)
ENTITY_PROPS = ("id", "group_id", "name", "canonical_name", "type", "aliases", "summary", "confidence",
                 "first_seen", "last_seen")
EPISODE_FIELDS = ("id", "group_id", "content", "role", "source_message_id", "reference_time", "response",
                   "agent_id", "platform", "channel_id", "created_at", "screened", "speaker", "name")


TIME_PROPS = frozenset({"valid_at", "invalid_at", "created_at", "expired_at", "last_seen", "first_seen", "reference_time"})


def projection(var: str, props: Sequence[str]) -> str:
    """A map projection of named properties (constant Cypher text from constant names).

    Times come back as integer microseconds since the epoch: the driver turns each
    zoned DateTime into Python objects at ~0.1 ms apiece, which made decoding 30 facts
    cost more than finding them.
    """
    parts = [
        f"{p}: {var}.{p}.epochSeconds * 1000000 + {var}.{p}.microsecond" if p in TIME_PROPS else "." + p
        for p in props
    ]
    return var + " {" + ", ".join(parts) + "}"


# p: whether the group holds a promoted memory (one seek of mb_promoted_group), so a recall that has just read the
# version need not ask for the promoted memories of the many groups that hold none (Neo4jLifecycle.promoted_in_recall)
VERSION_QUERY = ("OPTIONAL MATCH (gv:GroupVersion {group_id: $g}) RETURN gv.epoch AS e, coalesce(gv.v, 0) AS v, "
                 "EXISTS { MATCH (n:Promoted {group_id: $g}) } AS p")
# a change mirrors cannot follow row by row (rows deleted): a new epoch makes them reload the group
NEW_EPOCH = (
    "MERGE (gv:GroupVersion {group_id: $g}) ON CREATE SET gv.v = 0 "
    "SET gv.epoch = randomUUID(), gv.v = gv.v + 1, gv.written_at = datetime()"
)
# the groups to warm at start: most recently written first, from one version node a group (reading every episode
# for its newest took a pass over the whole store); a group written before versions carried the time comes last
RECENT_GROUPS = (
    "MATCH (gv:GroupVersion) WHERE gv.group_id STARTS WITH $prefix AND EXISTS { MATCH (:Episode {group_id: gv.group_id}) } "
    "RETURN gv.group_id AS g ORDER BY gv.written_at IS NULL, gv.written_at DESC LIMIT $k"
)
FACT_MAP = projection("r", FACT_PROPS)
ENTITY_MAP = projection("e", ENTITY_PROPS)
NODE_ENTITY_MAP = projection("n", ENTITY_PROPS)
NODE_EPISODE_MAP = projection("n", EPISODE_FIELDS)
FACT_RETURN = f"{FACT_MAP} AS r, s.name AS sn, o.name AS on"

# order. Groups are locked in sorted order: two transactions never wait on each other in a cycle.
BUMP_VERSIONS = (
    "CALL { UNWIND $groups AS g MERGE (gv:GroupVersion {group_id: g}) "
    "  ON CREATE SET gv.epoch = randomUUID(), gv.v = 0 SET gv.v = gv.v + 1, gv.written_at = datetime() "
    "  RETURN collect({g: g, v: gv.v, e: gv.epoch}) AS vers } "
)
VERSION_OF = "[x IN vers WHERE x.g = {}.group_id | x.v][0]"

# Retrieval counts are fact fields like any other: the write bumps the group's version and stamps the rows,
# so other processes' mirrors read the new counts (see flush_retrievals).
COUNT_RETRIEVALS = (
    BUMP_VERSIONS
    + "CALL { WITH vers UNWIND $rows AS x MATCH ()-[r:FACT {id: x.id, group_id: x.g}]->() "
    "  SET r.retrieval_count = coalesce(r.retrieval_count, 0) + x.n, r.ver = [v IN vers WHERE v.g = x.g | v.v][0] "
    "  RETURN collect({g: x.g, id: x.id, n: r.retrieval_count}) AS counts } "
    "RETURN vers, counts"
)

RESET_RETRIEVALS = (
    BUMP_VERSIONS
    + "CALL { WITH vers MATCH ()-[r:FACT {group_id: $g}]->() WHERE coalesce(r.retrieval_count, 0) <> 0 "
    "  SET r.retrieval_count = 0, r.ver = [v IN vers WHERE v.g = $g | v.v][0] RETURN count(*) AS n } "
    "RETURN n"
)

# One statement applies every buffered write of a transaction, kinds in dependency order
# (episodes and entities before the observations, links and facts that name them). Each part
# reports what it touched, so a missing endpoint is named instead of silently skipped.
FLUSH_WRITES = (
    BUMP_VERSIONS
    + "CALL { WITH vers UNWIND $eps AS p CREATE (n:Episode) SET n = p, n.ver = " + VERSION_OF.format("p") + " "
    "  RETURN count(*) AS n_eps } "
    "CALL { WITH vers UNWIND $ents AS p CREATE (e:Entity) SET e = p, e.ver = " + VERSION_OF.format("p") + " WITH e, p "
    "  CALL { WITH e, p UNWIND p.aliases AS key "
    "    MERGE (a:Alias {group_id: p.group_id, key: key, type: p.type}) ON CREATE SET a.entity_id = p.id "
    "    FOREACH (_ IN CASE WHEN a.entity_id = p.id THEN [1] ELSE [] END | MERGE (a)-[:ALIAS_OF]->(e)) } "
    "  RETURN count(*) AS n_ents } "
    "CALL { WITH vers UNWIND $obs AS o "
    "  CALL { WITH o, vers MATCH (e:Entity {id: o.id, group_id: o.g}) "
    "    MERGE (a:Alias {group_id: o.g, key: o.alias, type: e.type}) ON CREATE SET a.entity_id = o.id "
    "    SET e.name = o.name, e.ver = [v IN vers WHERE v.g = o.g | v.v][0], "
    "        e.aliases = CASE WHEN a.entity_id = o.id AND NOT o.alias IN coalesce(e.aliases, []) "
    "                         THEN coalesce(e.aliases, []) + o.alias ELSE e.aliases END, "
    "        e.last_seen = CASE WHEN e.last_seen IS NULL OR e.last_seen < o.seen THEN o.seen ELSE e.last_seen END, "
    "        e.first_seen = CASE WHEN e.first_seen IS NULL OR e.first_seen > o.seen THEN o.seen ELSE e.first_seen END "
    "    SET e.alias_text = reduce(t = '', x IN coalesce(e.aliases, []) | t + ' ' + x) "
    "    FOREACH (_ IN CASE WHEN a.entity_id = o.id THEN [1] ELSE [] END | MERGE (a)-[:ALIAS_OF]->(e)) "
    "    RETURN o.id AS hit } "
    "  RETURN collect(hit) AS obs_hit } "
    "CALL { UNWIND $links AS l MATCH (ep:Episode {id: l.ep, group_id: l.g}), (e:Entity {id: l.en, group_id: l.g}) "
    "  MERGE (ep)-[:MENTIONS]->(e) RETURN count(*) AS n_links } "
    "CALL { WITH vers UNWIND $facts AS p "
    "  MATCH (s:Entity {id: p.subject_id, group_id: p.group_id}), (o:Entity {id: p.object_id, group_id: p.group_id}) "
    "  CREATE (s)-[r:FACT]->(o) SET r = p, r.ver = " + VERSION_OF.format("p") + " RETURN collect(p.id) AS fact_hit } "
    "CALL { WITH vers UNWIND $upds AS u MATCH ()-[r:FACT {id: u.id, group_id: u.g}]->() "
    "  SET r.ver = [x IN vers WHERE x.g = u.g | x.v][0], "
    "      r.confidence = u.confidence, r.last_seen = u.last_seen, r.valid_at = u.valid_at, "
    "      r.invalid_at = u.invalid_at, r.expired_at = u.expired_at, r.superseded_by = u.superseded_by "
    "  RETURN collect(u.id) AS upd_hit } "
    "CALL { WITH vers UNWIND $srcs AS x "
    "  CALL { WITH x, vers MATCH ()-[r:FACT {id: x.id, group_id: x.g}]->() WHERE NOT x.ep IN coalesce(r.episode_ids, []) "
    "    SET r.episode_ids = coalesce(r.episode_ids, []) + x.ep, r.ver = [v IN vers WHERE v.g = x.g | v.v][0], "
    "        r.source_message_ids = coalesce(r.source_message_ids, []) + x.sm RETURN 1 AS one } "
    "  RETURN count(*) AS n_srcs } "
    "RETURN obs_hit, fact_hit, upd_hit"
)


# Group locks. A write transaction takes its groups' locks before its first read of them and holds them to commit,
# so what it read stays true (see overlay.py) and two writers of one group (two workers) never both act on the
# same fact chain: the second waits for the first to commit, then reads what it wrote. `SET gv.locked_at` takes the
# node's write lock and reads nothing; the version is read after it, so it is what the writer before committed
# (`SET gv.v = gv.v`, as before, read the version before the wait and wrote it back after: the group's version
# went back by one and two commits carried the same one, so a mirror could miss the second's rows). A batch locks (and creates) all its groups at once, sorted, so
# batches never wait on each other in a cycle; a read of a group not yet locked locks it only if it exists (a read
# through a transaction must not create nodes: an unknown group has nothing to race on but unique ids).
LOCK_GROUPS = (
    "UNWIND $groups AS g OPTIONAL MATCH (old:GroupVersion {group_id: g}) WITH g, old IS NULL AS fresh "
    "MERGE (gv:GroupVersion {group_id: g}) ON CREATE SET gv.epoch = randomUUID(), gv.v = 0 "
    "SET gv.locked_at = datetime() RETURN g, gv.epoch AS e, gv.v AS v, fresh"
)
LOCK_EXISTING_GROUPS = ("UNWIND $groups AS g MATCH (gv:GroupVersion {group_id: g}) SET gv.locked_at = datetime() "
                  "RETURN g, gv.epoch AS e, gv.v AS v, false AS fresh")
CHAIN_QUERY = (
    "MATCH (s:Entity)-[r:FACT {group_id: $g, subject_id: $s, relation: $rel}]->(o:Entity) "
    f"RETURN {FACT_RETURN}"
)
# What a batch reads first, in one statement: which of its episode ids are stored (and where), the entities its
# names are aliases of, and the fact chains of its facts' subjects (found by the subject's name).
PREFETCH = (
    "CALL { UNWIND $eps AS x OPTIONAL MATCH (n:Episode {id: x}) RETURN collect([x, n.group_id]) AS eps } "
    "CALL { UNWIND $aliases AS k "
    "  OPTIONAL MATCH (a:Alias {group_id: k[0], key: k[1]})-[:ALIAS_OF]->(e:Entity {group_id: k[0]}) "
    f"  WITH k, collect(CASE WHEN e IS NULL THEN null ELSE [a.type, {ENTITY_MAP}] END) AS owners "
    "  RETURN collect([k[0], k[1], owners]) AS aliases } "
    "CALL { UNWIND $chains AS c "
    "  MATCH (:Alias {group_id: c[0], key: c[1]})-[:ALIAS_OF]->(s:Entity {group_id: c[0]}) "
    "  CALL { WITH c, s OPTIONAL MATCH (s)-[r:FACT]->(o:Entity) "
    "    WHERE r.subject_id = s.id AND r.relation = c[2] AND r.group_id = c[0] "
    f"    RETURN collect(CASE WHEN r IS NULL THEN null ELSE {{r: {FACT_MAP}, on: o.name}} END) AS facts }} "
    "  RETURN collect([c[0], s.id, c[2], s.name, facts]) AS chains } "
    # the entities nearest each name no entity has, by an exact scan of the name's group: groups of at most
    # $scan_max entities only (a larger one is searched in the process's mirror of it instead)
    "CALL { UNWIND $sim_groups AS g OPTIONAL MATCH (e:Entity {group_id: g}) WITH g, count(e) AS n "
    "  WHERE n <= $scan_max RETURN collect(g) AS scannable } "
    "CALL { WITH scannable UNWIND $similar AS x WITH x WHERE x.g IN scannable "
    "  OPTIONAL MATCH (:Alias {group_id: x.g, key: x.k})-[:ALIAS_OF]->(known:Entity {group_id: x.g}) "
    "  WITH x, head(collect(known)) AS known WHERE known IS NULL "
    "  CALL { WITH x MATCH (e:Entity {group_id: x.g}) WHERE e.embedding IS NOT NULL "
    "    WITH e, vector.similarity.cosine(e.embedding, x.v) AS s ORDER BY s DESC, e.id LIMIT $sim_k "
    f"    RETURN collect({{e: {ENTITY_MAP}, s: s}}) AS near }} "
    "  RETURN collect([x.i, near]) AS similar } "
    "RETURN eps, aliases, chains, scannable, similar"
)


@dataclass(frozen=True)
class NodeSearch:
    """The Cypher of one node kind's searches: entities and episodes differ only in label and index names."""

    kind: str
    text: str
    exact: str
    ann: str
    count: str
    total: str


def _node_search(kind: str, label: str) -> NodeSearch:
    return NodeSearch(
        kind=kind,
        text=(f"CALL db.index.fulltext.queryNodes('mb_{kind}_text', $q, {{limit: $k}}) YIELD node AS n, score "
              "WHERE n.group_id = $g RETURN n.id AS id, score"),
        exact=(f"MATCH (n:{label} {{group_id: $g}}) WHERE n.embedding IS NOT NULL "
               "WITH n, vector.similarity.cosine(n.embedding, $v) AS s ORDER BY s DESC, n.id LIMIT $k "
               "RETURN n.id AS id, s"),
        ann=(f"CALL db.index.vector.queryNodes('mb_{kind}_vec', $n, $v) YIELD node AS n, score "
             "WHERE n.group_id = $g WITH n ORDER BY score DESC LIMIT $k2 "
             "WITH n, vector.similarity.cosine(n.embedding, $v) AS s RETURN n.id AS id, s ORDER BY s DESC, n.id LIMIT $k"),
        count=f"MATCH (n:{label} {{group_id: $g}}) RETURN count(n) AS c",
        total=f"MATCH (n:{label}) RETURN count(n) AS t",
    )


# the episodes just before and after each anchor in its group and channel, nearest first (see the contract).
# Each side is one range of the (group_id, reference_time) index between bounds computed first, and the tie-break
# on id (same instant) is one list comparison the planner cannot turn into a seek of its own: written as an OR, or
# with the bounds as expressions of the anchor, the planner split it into seeks with one bound, or scanned the
# index, reading every earlier or later episode of the group (see docs/performance.md).
def _side(lo: str, hi: str, after: bool, order: str, offset: str) -> str:
    cmp = ">" if after else "<"
    return ("WITH a, at, channel, lo, hi MATCH (n:Episode) USING INDEX SEEK n:Episode(group_id, reference_time) "
            f"WHERE n.group_id = $g AND n.reference_time >= {lo} AND n.reference_time <= {hi} "
            f"AND [n.reference_time, n.id] {cmp} [at, a.id] AND coalesce(n.channel_id, '') = channel "
            f"WITH n ORDER BY {order} LIMIT $span "
            f"WITH collect(n) AS ns UNWIND range(0, size(ns) - 1) AS i RETURN ns[i] AS n, {offset} AS o ")


EPISODE_CONTEXT = (
    "UNWIND $ids AS x MATCH (a:Episode) USING INDEX SEEK a:Episode(id) WHERE a.id = x AND a.group_id = $g "
    "WITH a, a.reference_time AS at, coalesce(a.channel_id, '') AS channel, "
    "a.reference_time - duration({seconds: $within}) AS lo, a.reference_time + duration({seconds: $within}) AS hi "
    "CALL { "  # importing WITH, not CALL (a) {}: the scope clause arrived in Neo4j 5.23 and we support 5.18
    + _side("lo", "at", False, "n.reference_time DESC, n.id DESC", "-(i + 1)")
    + "UNION "
    + _side("at", "hi", True, "n.reference_time, n.id", "i + 1")
    + f"}} RETURN a.id AS a, o, {NODE_EPISODE_MAP} AS n"
)


NODE_SEARCH = {"entity": _node_search("entity", "Entity"), "episode": _node_search("episode", "Episode")}

# graph recall (GraphStore.entity_links): per entity, the newest episodes that mention it and the most confident
# facts valid at $as_of that touch it, at most $k each, with the full count beside
ENTITY_MENTIONS = (
    "UNWIND $ids AS eid MATCH (:Entity {id: eid, group_id: $g})<-[:MENTIONS]-(ep:Episode {group_id: $g}) "
    "WHERE ep.reference_time <= $as_of WITH eid, ep ORDER BY ep.reference_time DESC, ep.id "
    "WITH eid, collect(ep.id) AS eps RETURN eid AS e, eps[..$k] AS eps, size(eps) AS n"
)
ENTITY_FACTS = (
    "UNWIND $ids AS eid MATCH (a:Entity {id: eid, group_id: $g})-[r:FACT {group_id: $g}]-(b:Entity) "
    f"WHERE {VALID_AT} WITH eid, r, b ORDER BY r.confidence DESC, r.id "
    "WITH eid, collect([r.id, b.id, r.confidence]) AS fs RETURN eid AS e, fs[..$k] AS fs, size(fs) AS n"
)

# the group's unscreened episodes whose content says a phrase (WriteTxn.episodes_saying: the mention links of a
# name made known later), newest first; every match of the phrase in the group is read, then the newest kept
EPISODES_SAYING = (
    "CALL db.index.fulltext.queryNodes('mb_episode_text', $q) YIELD node AS n "
    "WHERE n.group_id = $g AND NOT coalesce(n.screened, false) "
    "RETURN n.id AS id, n.content AS content ORDER BY n.reference_time DESC, n.id LIMIT $k"
)
