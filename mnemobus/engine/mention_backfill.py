"""Mention links for turns stored before their entity: when an entity (or a new alias of one) is made, the group's
earlier turns that say its name are linked to it.

Why: a turn looks its names up when it is written (engine/mentions.py), so "Biscuit chewed up my sneakers" said
a batch before "Sofia adopted a puppy called Biscuit" found no entity and stayed out of the mention graph graph
recall spreads over. The store's full-text index of turns finds the candidates (`WriteTxn.episodes_saying`);
a turn is linked only when it says the name as ingestion would have read it (a capitalised name,
`named_spans`), so "a biscuit for the dog" never links to Biscuit. Bounded: at most BACKFILL_MAX turns per name.
"""

from __future__ import annotations

from mnemobus.engine.mentions import named_spans
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import WriteTxn
from mnemobus.store.model import Entity

BACKFILL_MAX = 200  # turns read per new name: a name said in thousands of turns links its newest ones


async def backfill_mentions(txn: WriteTxn, group_id: GroupId, name: str, entity_id: str) -> int:
    """Link the group's stored turns that say `name` (normalised) to the entity; returns how many were linked
    (a turn already linked counts again: the link is idempotent)."""
    linked = 0
    for episode_id, content in await txn.episodes_saying(group_id, name, BACKFILL_MAX):
        if name in named_spans(content):
            await txn.link_episode_entity(group_id, episode_id, entity_id)
            linked += 1
    return linked


async def backfill_new_name(txn: WriteTxn, group_id: GroupId, name: str, entity: Entity) -> int:
    """As backfill_mentions, for a name observed of a known entity: only when the entity did not have it yet
    (turns saying a name it had were linked when that name was made)."""
    if name in (entity.canonical_name, *entity.aliases):
        return 0
    return await backfill_mentions(txn, group_id, name, entity.id)
