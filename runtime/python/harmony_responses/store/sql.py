"""The store on a SQL database (SQLite or PostgreSQL): the statements, written once for both.

Opening migrates the schema, registers this process as a writer and recovers the responses of dead
writers. A history is read with one recursive query that walks `previous_response_id` from the
response asked for back to the first turn, so loading a 50-turn conversation is one round trip.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from typing import Any

from .base import Store
from .database import Database, Tx
from .migrations import migrate
from .model import (
    SECRET_BYTES,
    TERMINAL_STATUSES,
    CallRecord,
    DuplicateResponse,
    EventPage,
    History,
    InvalidArgument,
    ItemNotFound,
    ItemPage,
    Order,
    Owner,
    ResponseInProgress,
    ResponseNotFound,
    ResponseNotInProgress,
    ResponseStatus,
    Turn,
    interrupted,
    messages_from,
    unpack_tokens,
)

INPUT, OUTPUT = 0, 1
"""`response_items.direction`."""
UNFINISHED = tuple(s.value for s in ResponseStatus if s not in TERMINAL_STATUSES)
_UNFINISHED_SQL = ", ".join("?" for _ in UNFINISHED)
MAX_CHAIN = 100_000
"""A guard for the history walk; chains cannot loop (a response continues only an older one)."""

_HISTORY = """
WITH RECURSIVE chain (id, previous_response_id, status, input_messages, output_messages, input_calls, output_calls,
                       rendered_by, input_rendered, output_rendered, depth) AS (
    SELECT id, previous_response_id, status, input_messages, output_messages, input_calls, output_calls,
           rendered_by, input_rendered, output_rendered, 0
    FROM responses WHERE id = ? AND owner = ?
    UNION ALL
    SELECT r.id, r.previous_response_id, r.status, r.input_messages, r.output_messages, r.input_calls,
           r.output_calls, r.rendered_by, r.input_rendered, r.output_rendered, c.depth + 1
    FROM responses r JOIN chain c ON r.id = c.previous_response_id
    WHERE r.owner = ? AND c.depth < ?
)
SELECT id, previous_response_id, status, input_messages, output_messages, input_calls, output_calls,
       rendered_by, input_rendered, output_rendered
FROM chain ORDER BY depth DESC
"""


def _both(input_rendered: bytes | None, output_rendered: bytes | None) -> tuple[list[int], ...] | None:
    first, second = unpack_tokens(input_rendered), unpack_tokens(output_rendered)
    return None if first is None or second is None else first + second


def _turn(
    rid: str,
    _previous: str | None,
    status: str,
    ins: str,
    outs: str,
    in_calls: str,
    out_calls: str,
    rendered_by: str | None,
    in_rendered: bytes | None,
    out_rendered: bytes | None,
) -> Turn:
    """A row of the history query as a turn."""
    return Turn(
        rid,
        ResponseStatus(status),
        messages_from(json.loads(ins)),
        messages_from(json.loads(outs)),
        {**json.loads(in_calls), **json.loads(out_calls)},
        rendered_by,
        _both(in_rendered, out_rendered) if rendered_by is not None else None,
    )


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class SQLStore(Store):
    """Responses in a SQL database; see `database` for the dialects."""

    def __init__(self, db: Database) -> None:
        self._db = db
        try:
            self.migrations_applied = migrate(db)
            self.writer_id = db.register_writer()
            self.recover()
        except BaseException:
            db.close()
            raise

    # -- writes ------------------------------------------------------------------------------------

    def _insert(
        self,
        response_id: str,
        owner: Owner,
        resource: dict[str, Any],
        input_items: list[tuple[str, dict[str, Any]]],
        input_messages: list[dict[str, Any]],
        previous_response_id: str | None,
        calls: dict[str, CallRecord],
        rendered: tuple[str, bytes] | None,
    ) -> None:
        now = time.time()
        row = (response_id, owner.digest, previous_response_id, resource["status"], self.writer_id, now, now)
        items = [(response_id, INPUT, i, item_id, _dump(item)) for i, (item_id, item) in enumerate(input_items)]
        with self._db.write() as tx:
            if previous_response_id is not None:
                self._check_continuable(tx, previous_response_id, owner)
            inserted = tx.execute(
                "INSERT INTO responses (id, owner, previous_response_id, status, writer_id, created_at, updated_at,"
                " resource, input_messages, output_messages, input_calls, rendered_by, input_rendered)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (*row, _dump(resource), _dump(input_messages), _dump(calls), *(rendered or (None, None))),
            )
            if inserted != 1:
                raise DuplicateResponse(response_id)
            tx.executemany(
                "INSERT INTO response_items (response_id, direction, position, item_id, body) VALUES (?, ?, ?, ?, ?)",
                items,
            )

    @staticmethod
    def _check_continuable(tx: Tx, response_id: str, owner: Owner) -> None:
        found = tx.rows("SELECT status FROM responses WHERE id = ? AND owner = ?", (response_id, owner.digest))
        if not found:
            raise ResponseNotFound(response_id)
        if found[0][0] in UNFINISHED:
            raise ResponseInProgress(response_id)

    def _complete(
        self,
        response_id: str,
        status: ResponseStatus,
        resource: dict[str, Any],
        output_items: list[tuple[str, dict[str, Any]]],
        output_messages: list[dict[str, Any]],
        calls: dict[str, CallRecord],
        rendered: tuple[str, bytes] | None,
    ) -> None:
        items = [(response_id, OUTPUT, i, item_id, _dump(item)) for i, (item_id, item) in enumerate(output_items)]
        key, blob = rendered or (None, None)
        values = (status.value, _dump(resource), _dump(output_messages), _dump(calls), blob, key, time.time())
        with self._db.write() as tx:
            updated = tx.execute(
                "UPDATE responses SET status = ?, resource = ?, output_messages = ?, output_calls = ?,"
                " output_rendered = ?, rendered_by = CASE WHEN rendered_by = ? THEN rendered_by END,"
                f" writer_id = NULL, updated_at = ? WHERE id = ? AND status IN ({_UNFINISHED_SQL})",
                (*values, response_id, *UNFINISHED),
            )
            if updated != 1:
                raise ResponseNotInProgress(response_id)
            tx.executemany(
                "INSERT INTO response_items (response_id, direction, position, item_id, body) VALUES (?, ?, ?, ?, ?)",
                items,
            )

    def _progress(self, response_id: str, status: ResponseStatus, resource: dict[str, Any]) -> None:
        with self._db.write() as tx:
            updated = tx.execute(
                "UPDATE responses SET status = ?, resource = ?, updated_at = ?"
                f" WHERE id = ? AND status IN ({_UNFINISHED_SQL})",
                (status.value, _dump(resource), time.time(), response_id, *UNFINISHED),
            )
            if updated != 1:
                raise ResponseNotInProgress(response_id)

    def append_events(self, response_id: str, events: Sequence[tuple[int, str]]) -> bool:
        with self._db.write() as tx:
            found = tx.rows(
                f"SELECT cancel_requested FROM responses WHERE id = ? AND status IN ({_UNFINISHED_SQL})",
                (response_id, *UNFINISHED),
            )
            if not found:
                raise ResponseNotInProgress(response_id)
            tx.executemany(
                "INSERT INTO response_events (response_id, sequence_number, body) VALUES (?, ?, ?)",
                [(response_id, n, body) for n, body in events],
            )
        return bool(found[0][0])

    def events_after(self, response_id: str, owner: Owner, after: int) -> EventPage:
        with self._db.read() as tx:
            found = tx.rows(
                "SELECT status, cancel_requested FROM responses WHERE id = ? AND owner = ?",
                (response_id, owner.digest),
            )
            if not found:
                raise ResponseNotFound(response_id)
            rows = tx.rows(
                "SELECT sequence_number, body FROM response_events WHERE response_id = ? AND sequence_number > ?"
                " ORDER BY sequence_number",
                (response_id, after),
            )
        status, cancel = found[0]
        return EventPage(ResponseStatus(status), tuple((int(n), str(body)) for n, body in rows), bool(cancel))

    def request_cancel(self, response_id: str, owner: Owner) -> dict[str, Any]:
        with self._db.write() as tx:
            tx.execute(
                "UPDATE responses SET cancel_requested = 1"
                f" WHERE id = ? AND owner = ? AND status IN ({_UNFINISHED_SQL})",
                (response_id, owner.digest, *UNFINISHED),
            )
            found = tx.rows("SELECT resource FROM responses WHERE id = ? AND owner = ?", (response_id, owner.digest))
        if not found:
            raise ResponseNotFound(response_id)
        result: dict[str, Any] = json.loads(found[0][0])
        return result

    def delete(self, response_id: str, owner: Owner) -> None:
        with self._db.write() as tx:
            if tx.execute("DELETE FROM responses WHERE id = ? AND owner = ?", (response_id, owner.digest)) != 1:
                raise ResponseNotFound(response_id)

    # -- reads -------------------------------------------------------------------------------------

    def get(self, response_id: str, owner: Owner) -> dict[str, Any]:
        with self._db.read() as tx:
            found = tx.rows("SELECT resource FROM responses WHERE id = ? AND owner = ?", (response_id, owner.digest))
        if not found:
            raise ResponseNotFound(response_id)
        result: dict[str, Any] = json.loads(found[0][0])
        return result

    def _page(self, response_id: str, owner: Owner, after: str | None, limit: int, order: Order) -> ItemPage:
        ascending = order is Order.ASC
        with self._db.read() as tx:
            if not tx.rows("SELECT 1 FROM responses WHERE id = ? AND owner = ?", (response_id, owner.digest)):
                raise ResponseNotFound(response_id)
            if after is None:
                cursor = -1 if ascending else 2**31 - 1
            else:
                found = tx.rows(
                    f"SELECT {'MIN' if ascending else 'MAX'}(position) FROM response_items"
                    " WHERE response_id = ? AND direction = ? AND item_id = ?",
                    (response_id, INPUT, after),
                )
                if found[0][0] is None:
                    raise InvalidArgument("after", f"{after!r} is not an input item of this response")
                cursor = found[0][0]
            rows = tx.rows(
                "SELECT body FROM response_items WHERE response_id = ? AND direction = ?"
                f" AND position {'>' if ascending else '<'} ? ORDER BY position {'ASC' if ascending else 'DESC'}"
                " LIMIT ?",
                (response_id, INPUT, cursor, limit + 1),
            )
        return ItemPage(tuple(json.loads(body) for (body,) in rows[:limit]), has_more=len(rows) > limit)

    def get_item(self, item_id: str, owner: Owner) -> dict[str, Any]:
        with self._db.read() as tx:
            found = tx.rows(
                "SELECT i.body FROM response_items i JOIN responses r ON r.id = i.response_id"
                " WHERE i.item_id = ? AND r.owner = ?"
                " ORDER BY r.created_at DESC, i.direction DESC, i.position DESC LIMIT 1",
                (item_id, owner.digest),
            )
        if not found:
            raise ItemNotFound(item_id)
        result: dict[str, Any] = json.loads(found[0][0])
        return result

    def load_history(self, response_id: str, owner: Owner) -> History:
        with self._db.read() as tx:
            rows = tx.rows(_HISTORY, (response_id, owner.digest, owner.digest, MAX_CHAIN))
        if not rows:
            raise ResponseNotFound(response_id)
        oldest_previous = rows[0][1]
        if oldest_previous is not None:
            raise ResponseNotFound(oldest_previous, requested=response_id)
        if rows[-1][2] in UNFINISHED:
            raise ResponseInProgress(response_id)
        return History(tuple(_turn(*row) for row in rows))

    def secret(self, name: str) -> bytes:
        with self._db.write() as tx:
            tx.execute(
                "INSERT INTO store_secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
                (name, secrets.token_hex(SECRET_BYTES), time.time()),
            )
            (value,) = tx.rows("SELECT value FROM store_secrets WHERE name = ?", (name,))[0]
        return bytes.fromhex(value)

    # -- recovery ----------------------------------------------------------------------------------

    def recover(self) -> int:
        self.writer_id = self._db.ensure_writer(self.writer_id)
        failed = 0
        with self._db.write() as tx:
            for (writer_id,) in tx.rows("SELECT id FROM store_writers WHERE id <> ?", (self.writer_id,)):
                with self._db.writer_is_dead(tx, writer_id) as dead:
                    if dead:
                        failed += self._fail_unfinished(tx, "writer_id = ?", (writer_id,))
                        tx.execute("DELETE FROM store_writers WHERE id = ?", (writer_id,))
            # Rows whose writer row is gone altogether (removed by hand, say) have no one to finish them.
            failed += self._fail_unfinished(
                tx, "writer_id IS NOT NULL AND writer_id NOT IN (SELECT id FROM store_writers)", ()
            )
        return failed

    @staticmethod
    def _fail_unfinished(tx: Tx, where: str, params: tuple[Any, ...]) -> int:
        rows = tx.rows(
            f"SELECT id, resource FROM responses WHERE {where} AND status IN ({_UNFINISHED_SQL})",
            (*params, *UNFINISHED),
        )
        for response_id, resource in rows:
            tx.execute(
                "UPDATE responses SET status = ?, resource = ?, writer_id = NULL, updated_at = ? WHERE id = ?",
                (ResponseStatus.FAILED.value, _dump(interrupted(json.loads(resource))), time.time(), response_id),
            )
        return len(rows)

    def close(self) -> None:
        try:
            with self._db.write() as tx:
                self._fail_unfinished(tx, "writer_id = ?", (self.writer_id,))
                tx.execute("DELETE FROM store_writers WHERE id = ?", (self.writer_id,))
        finally:
            self._db.close()
