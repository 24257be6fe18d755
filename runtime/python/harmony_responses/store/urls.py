"""`open_store(url)`: the store a URL names, and where the embedded default lives.

- `memory` — in this process only (tests, servers that keep nothing).
- `sqlite:///PATH` — a SQLite file; as in SQLAlchemy, the path is what follows the third slash, so
  `sqlite:///responses.sqlite3` is relative to the working directory and `sqlite:////var/lib/x.sqlite3`
  is absolute; `~` is expanded. `sqlite://` alone is the default file (`default_sqlite_path`).
  `?synchronous=normal` relaxes durability from power cuts (a killed process still loses nothing).
- `postgresql://…` or `postgres://…` — a libpq URL, passed to the driver as it is, except for
  `pool_size` (connections per process, default 8), which this package reads and removes.

Opening migrates the schema, registers the process and recovers responses of dead processes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .base import Store
from .memory import MemoryStore
from .model import StoreURLError

APP_DIR = "harmony-responses"
DEFAULT_FILE = "responses.sqlite3"
DEFAULT_POOL_SIZE = 8


def data_dir() -> Path:
    """The user's data folder: `$XDG_DATA_HOME` when set to an absolute path; otherwise
    `~/Library/Application Support` on macOS, `%LOCALAPPDATA%` on Windows, `~/.local/share` elsewhere."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support"
    local = os.environ.get("LOCALAPPDATA", "")
    if sys.platform == "win32" and local:
        return Path(local)
    return Path.home() / ".local" / "share"


def default_sqlite_path() -> Path:
    """Where `--store` points by default: `<data_dir()>/harmony-responses/responses.sqlite3`."""
    return data_dir() / APP_DIR / DEFAULT_FILE


def default_store_url() -> str:
    return "sqlite:///" + str(default_sqlite_path())


def open_store(url: str) -> Store:
    """Open (and, for a new database, create) the store `url` names. Raises `StoreURLError` for a URL
    naming no backend, `StoreError` when the database cannot be opened, `MigrationError` when its schema
    is newer than this release or was edited."""
    scheme, sep, rest = url.partition(":")
    scheme = scheme.lower()
    if scheme == "memory" and rest in ("", "//"):
        return MemoryStore()
    if scheme == "sqlite" and sep:
        return _open_sqlite(rest)
    if scheme in ("postgresql", "postgres") and sep:
        return _open_postgres(url)
    raise StoreURLError(f"store URL {url!r}: expected memory, sqlite:///PATH or postgresql://…")


def _open_sqlite(rest: str) -> Store:
    from .sql import SQLStore
    from .sqlite import SQLiteDatabase

    location, _, query = rest.partition("?")
    if location not in ("", "//") and not location.startswith("///"):
        raise StoreURLError(f"sqlite URL 'sqlite:{rest}': write sqlite:///PATH (three slashes, then the path)")
    options = dict(parse_qsl(query, keep_blank_values=True))
    synchronous = options.pop("synchronous", "full").lower()
    if options:
        raise StoreURLError(f"sqlite URL: unknown options {sorted(options)} (known: synchronous)")
    path = Path(location[3:]).expanduser() if location.startswith("///") and location[3:] else default_sqlite_path()
    return SQLStore(SQLiteDatabase(path, synchronous=synchronous))


def _open_postgres(url: str) -> Store:
    try:
        from .postgres import PostgresDatabase
    except ImportError as exc:  # the optional dependencies are missing
        raise StoreURLError(
            f"a PostgreSQL store needs psycopg: pip install 'harmony-responses[store]' ({exc})"
        ) from exc
    from .sql import SQLStore

    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    pool = [v for k, v in query if k == "pool_size"]
    try:
        pool_size = int(pool[-1]) if pool else DEFAULT_POOL_SIZE
    except ValueError:
        raise StoreURLError(f"postgresql URL: pool_size must be an integer, not {pool[-1]!r}") from None
    if pool_size < 1:
        raise StoreURLError("postgresql URL: pool_size must be at least 1")
    conninfo = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "pool_size"])))
    return SQLStore(PostgresDatabase(conninfo, pool_size=pool_size))
