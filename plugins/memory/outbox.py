"""A durable outbox for episodes the stream would not take.

Publishing an episode can fail while JetStream is restarting or a cluster
is electing a leader. Rather than drop the exchange (the fire-and-forget
failure seed 000 describes), the plugin parks it in a local SQLite file and
a background loop republishes it, with the same message id so the server
still de-duplicates. The file survives a restart of the plugin.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path


class EpisodeOutbox:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._closed = False
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a parked episode must survive a power cut
        self._db.execute("CREATE TABLE IF NOT EXISTS outbox (msg_id TEXT PRIMARY KEY, subject TEXT NOT NULL, "
                         "data BLOB NOT NULL, parked_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0)")

    def park(self, msg_id: str, subject: str, data: bytes) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO outbox (msg_id, subject, data, parked_at) VALUES (?, ?, ?, ?)",
                             (msg_id, subject, data, time.time()))

    def pending(self, limit: int = 100) -> list[tuple[str, str, bytes]]:
        with self._lock:
            if self._closed:  # the republish loop may still be finishing its last round
                return []
            return self._db.execute("SELECT msg_id, subject, data FROM outbox ORDER BY parked_at LIMIT ?",
                                    (limit,)).fetchall()

    def delivered(self, msg_id: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._db.execute("DELETE FROM outbox WHERE msg_id = ?", (msg_id,))

    def failed_again(self, msg_id: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._db.execute("UPDATE outbox SET attempts = attempts + 1 WHERE msg_id = ?", (msg_id,))

    def depth(self) -> int:
        with self._lock:
            if self._closed:
                return 0
            return int(self._db.execute("SELECT count(*) FROM outbox").fetchone()[0])

    def oldest_age_s(self) -> float:
        with self._lock:
            row = self._db.execute("SELECT min(parked_at) FROM outbox").fetchone()
        return 0.0 if row[0] is None else max(0.0, time.time() - row[0])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._db.close()
