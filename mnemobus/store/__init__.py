"""Graph stores: the contract, the data model, and the embedded SQLite backend."""

from mnemobus.store.contract import (
    BatchTransactions, DeleteCounts, FactHop, GraphStore, Hit, Step, WriteTxn, neighbourhood,
)
from mnemobus.store.model import (
    Entity,
    Episode,
    Fact,
    IngestOutcome,
    RecallQuery,
    RecallResult,
    ScoredEpisode,
    ScoredFact,
    episode_id_for,
)

__all__ = [
    "BatchTransactions", "DeleteCounts", "Entity", "Episode", "Fact", "FactHop", "GraphStore", "Hit", "IngestOutcome", "RecallQuery",
    "RecallResult", "ScoredEpisode", "ScoredFact", "Step", "WriteTxn", "episode_id_for", "neighbourhood",
]
