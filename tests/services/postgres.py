"""A throwaway PostgreSQL server for the tests, started from the distribution's binaries.

`PostgresServer.start()` finds the server binaries (`$PG_BINDIR`, then `PATH`, then Debian's
`/usr/lib/postgresql/<version>/bin`, newest first) and, when there are none and we are root, installs
Debian's `postgresql` package with apt-get. It then makes a cluster in a temporary folder, runs
`postgres` on 127.0.0.1 on a free port (as the `postgres` user when we are root: the server refuses to
run as root), waits until it accepts connections, and hands out one fresh database per test.
`stop()` shuts it down and removes the folder. The cluster runs with fsync off: it is thrown away.

Also a command, for trying things by hand:

    python tests/services/postgres.py install    # install the binaries if they are missing
    python tests/services/postgres.py run        # start a server, print its URL, stop on Ctrl-C
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

SERVER_BINARIES = ("initdb", "postgres")
DEBIAN_PACKAGE = "postgresql"
SUPERUSER = "postgres"
START_TIMEOUT_S = 60.0


class PostgresUnavailable(RuntimeError):
    """The binaries are missing and cannot be installed here, or the server did not start."""


def find_bindir() -> Path | None:
    candidates = []
    if os.environ.get("PG_BINDIR"):
        candidates.append(Path(os.environ["PG_BINDIR"]))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(p) for p in Path(path).parent.name.split(".") if p.isdigit())

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    for folder in candidates:
        if all((folder / name).is_file() for name in SERVER_BINARIES):
            return folder
    return None


def _run_logged(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)


def ensure_installed() -> Path:
    """The folder with `initdb` and `postgres`, installing Debian's package first when they are missing."""
    found = find_bindir()
    if found is not None:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise PostgresUnavailable(
            "the PostgreSQL server binaries (initdb, postgres) are not installed and this process cannot "
            f"install them (needs root and apt-get): install the {DEBIAN_PACKAGE!r} package, or set PG_BINDIR"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", DEBIAN_PACKAGE]
    result = _run_logged(install, env)
    if result.returncode != 0:  # the package lists may be missing or stale on a fresh machine
        _run_logged(["apt-get", "update", "-q"], env)
        result = _run_logged(install, env)
    found = find_bindir()
    if result.returncode != 0 or found is None:
        raise PostgresUnavailable(f"apt-get could not install {DEBIAN_PACKAGE}:\n{result.stdout}\n{result.stderr}")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PostgresServer:
    """One throwaway cluster; `url(db)` names a database in it."""

    def __init__(self) -> None:
        self.port = 0
        self._folder: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @staticmethod
    def _server_user() -> pwd.struct_passwd | None:
        """The user to run the server as: `postgres` when we are root (the server refuses root), else us."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(SUPERUSER)
        except KeyError:
            raise PostgresUnavailable(f"running as root, and there is no {SUPERUSER!r} user to run it as") from None

    def start(self) -> PostgresServer:
        bindir = ensure_installed()
        user = self._server_user()
        drop: dict[str, Any] = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
        self._folder = Path(tempfile.mkdtemp(prefix="harmony-pg-"))
        data, sockets, self._log = self._folder / "data", self._folder / "sockets", self._folder / "server.log"
        sockets.mkdir()
        if user is not None:
            for path in (self._folder, sockets):
                os.chown(path, user.pw_uid, user.pw_gid)
        initdb_args = ["-D", str(data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"]
        initdb = subprocess.run(
            [str(bindir / "initdb"), *initdb_args],
            capture_output=True,
            text=True,
            check=False,
            cwd=self._folder,
            **drop,
        )
        if initdb.returncode != 0:
            self.stop()
            raise PostgresUnavailable(f"initdb failed:\n{initdb.stdout}\n{initdb.stderr}")
        for _attempt in range(5):  # the free port can be taken between our probe and the server's bind
            self.port = free_port()
            settings = {
                "listen_addresses": "127.0.0.1",
                "port": str(self.port),
                "unix_socket_directories": str(sockets),
                "fsync": "off",
                "synchronous_commit": "off",
                "full_page_writes": "off",
                "max_connections": "200",
            }
            args = [str(bindir / "postgres"), "-D", str(data)]
            for key, value in settings.items():
                args += ["-c", f"{key}={value}"]
            with self._log.open("ab") as log:
                self._process = subprocess.Popen(
                    args,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self._folder,
                    start_new_session=True,
                    **drop,
                )
            if self._wait_ready():
                return self
        log_text = self._log.read_text(errors="replace")
        self.stop()
        raise PostgresUnavailable(f"postgres did not start; its log:\n{log_text}")

    def _wait_ready(self) -> bool:
        import psycopg

        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        return False

    def url(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # "fast" shutdown: disconnect clients, stop
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        folder, self._folder = self._folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    if argv[1:] == ["install"]:
        print(ensure_installed())
        return 0
    if argv[1:] == ["run"]:
        server = PostgresServer().start()
        print(server.create_database(), flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
