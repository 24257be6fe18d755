"""The store's schema, as numbered migrations per dialect, and the runner every open calls.

`migrate` runs in one write transaction under a schema lock (PostgreSQL: a transaction advisory lock;
SQLite: `BEGIN IMMEDIATE`, the database's write lock), so processes that open one database at the same
time apply each migration once; both dialects run DDL inside transactions, so a migration is applied
whole or not at all. `schema_migrations` records each version with the checksum of its statements: a
recorded migration whose statements changed since, or a version this code does not know (a newer
release migrated the database), stops the open with `MigrationError` instead of guessing.

Never edit a released migration; add the next version.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .model import MigrationError

if TYPE_CHECKING:
    from .database import Database


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]

    @property
    def checksum(self) -> str:
        return hashlib.sha256("\n;\n".join(self.statements).encode("utf-8")).hexdigest()


# Tables (both dialects):
# - store_writers: one row per open store (process); its id keys the writer's liveness lock.
# - responses: one row per stored response. `resource` is the ResponseResource JSON (the start snapshot
#   until it finishes); `input_messages`/`output_messages` the turn's Harmony messages as JSON arrays of
#   `Message.to_dict()`; `writer_id` is set while the response is unfinished and cleared when it ends.
#   `previous_response_id` has no foreign key on purpose: deleting a response must not delete or rewrite
#   the responses that continued it; their history then stops at a missing response.
# - response_items: input (direction 0) and output (direction 1) items, in order, with their ids.
# Version 2 adds:
# - responses.input_calls / output_calls: the calls among the turn's input and output items, as a
#   JSON object call id → the caller's record of the call (the server keeps [author, channel]). Harmony
#   messages carry no call ids, so a later turn's output item finds the call it answers here.
# - responses.rendered_by / input_rendered / output_rendered: each turn message's token ids as the server
#   rendered it (a blob of little-endian uint32: per message its length, then its ids), and the key of
#   that rendering (the encoding and its rules): the next prompt is assembled from them, not re-encoded.
# - store_secrets: named random keys shared by every process on the database (the compaction signing key).
# Version 3 adds background responses:
# - responses.cancel_requested: 1 once `POST /responses/{id}/cancel` asked (in any process) that a running
#   background response stop; the process running it polls the flag.
# - response_events: the stream events of a background response created with `stream: true`, by sequence
#   number, each the SSE frame as sent, so any process can replay them after a sequence number
#   (`GET /responses/{id}?stream=true&starting_after=N`) and follow the new ones.

_SQLITE_V1 = (
    """CREATE TABLE store_writers (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        started_at REAL NOT NULL
    )""",
    """CREATE TABLE responses (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        previous_response_id TEXT,
        status TEXT NOT NULL,
        writer_id INTEGER,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        resource TEXT NOT NULL,
        input_messages TEXT NOT NULL,
        output_messages TEXT NOT NULL
    )""",
    "CREATE INDEX responses_unfinished ON responses (writer_id) WHERE writer_id IS NOT NULL",
    """CREATE TABLE response_items (
        response_id TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE,
        direction INTEGER NOT NULL,
        position INTEGER NOT NULL,
        item_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (response_id, direction, position)
    )""",
    "CREATE INDEX response_items_by_id ON response_items (item_id)",
)

_POSTGRES_V1 = (
    """CREATE TABLE store_writers (
        id INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL
    )""",
    """CREATE TABLE responses (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        previous_response_id TEXT,
        status TEXT NOT NULL,
        writer_id INTEGER,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        resource TEXT NOT NULL,
        input_messages TEXT NOT NULL,
        output_messages TEXT NOT NULL
    )""",
    "CREATE INDEX responses_unfinished ON responses (writer_id) WHERE writer_id IS NOT NULL",
    """CREATE TABLE response_items (
        response_id TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE,
        direction SMALLINT NOT NULL,
        position INTEGER NOT NULL,
        item_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (response_id, direction, position)
    )""",
    "CREATE INDEX response_items_by_id ON response_items (item_id)",
)

_SQLITE_V2 = (
    "ALTER TABLE responses ADD COLUMN input_calls TEXT NOT NULL DEFAULT '{}'",
    "ALTER TABLE responses ADD COLUMN output_calls TEXT NOT NULL DEFAULT '{}'",
    "ALTER TABLE responses ADD COLUMN rendered_by TEXT",
    "ALTER TABLE responses ADD COLUMN input_rendered BLOB",
    "ALTER TABLE responses ADD COLUMN output_rendered BLOB",
    """CREATE TABLE store_secrets (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
)

_POSTGRES_V2 = (
    "ALTER TABLE responses ADD COLUMN input_calls TEXT NOT NULL DEFAULT '{}'",
    "ALTER TABLE responses ADD COLUMN output_calls TEXT NOT NULL DEFAULT '{}'",
    "ALTER TABLE responses ADD COLUMN rendered_by TEXT",
    "ALTER TABLE responses ADD COLUMN input_rendered BYTEA",
    "ALTER TABLE responses ADD COLUMN output_rendered BYTEA",
    """CREATE TABLE store_secrets (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    )""",
)

_SQLITE_V3 = (
    "ALTER TABLE responses ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0",
    """CREATE TABLE response_events (
        response_id TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE,
        sequence_number INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (response_id, sequence_number)
    )""",
)

_POSTGRES_V3 = (
    "ALTER TABLE responses ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0",
    """CREATE TABLE response_events (
        response_id TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE,
        sequence_number INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (response_id, sequence_number)
    )""",
)

SQLITE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "responses, items and writers", _SQLITE_V1),
    Migration(2, "function calls and token ids per turn, shared secrets", _SQLITE_V2),
    Migration(3, "background responses: cancel requests and stored stream events", _SQLITE_V3),
)
POSTGRES_MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "responses, items and writers", _POSTGRES_V1),
    Migration(2, "function calls and token ids per turn, shared secrets", _POSTGRES_V2),
    Migration(3, "background responses: cancel requests and stored stream events", _POSTGRES_V3),
)

_LEDGER = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    checksum TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""


def migrate(db: Database) -> tuple[int, ...]:
    """Bring the database to the newest schema; return the versions this call applied."""
    applied = []
    with db.write() as tx:
        db.lock_schema(tx)
        tx.execute(_LEDGER)
        done = dict(tx.rows("SELECT version, checksum FROM schema_migrations"))
        known = {m.version: m for m in db.migrations}
        newer = sorted(set(done) - set(known))
        if newer:
            raise MigrationError(
                f"the database has schema versions {newer} that this harmony-responses does not know "
                f"(it knows up to {max(known)}): a newer release migrated it; upgrade this one"
            )
        for version, checksum in sorted(done.items()):
            if known[version].checksum != checksum:
                raise MigrationError(
                    f"schema version {version} ({known[version].name!r}) was applied with other statements "
                    "than this release has: the migration was edited after release"
                )
        for migration in db.migrations:
            if migration.version in done:
                continue
            for statement in migration.statements:
                tx.execute(statement)
            tx.execute(
                "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
                (migration.version, migration.name, migration.checksum, datetime.now(UTC).isoformat()),
            )
            applied.append(migration.version)
    return tuple(applied)
