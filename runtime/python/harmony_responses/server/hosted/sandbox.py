"""Code-interpreter containers: one stateful Python kernel per container id, each inside bubblewrap.

A container is a scratch folder (its files, seen inside as `/mnt/data`) and, while it is used, a kernel
process (`kernel.py`) started by `bwrap` with every namespace unshared (no network: only a loopback
interface of its own; its own pids, IPC, UTS), a new root holding only the system folders and the
interpreter, read-only, a private size-limited `/tmp`, no environment but a fixed few variables, and a
new session. When the server runs as root, bwrap itself is started as an unprivileged uid of a small pool
(one uid per live container, so the process-count limit counts one container's processes and a container
cannot touch another's files); otherwise the kernel runs as the server's user inside a user namespace.
The kernel sets its memory, file-size, process and CPU limits before it reads any code (see kernel.py).

Calls to one container are run one at a time. A call that outlives its wall-clock timeout, or a kernel
that dies or writes something unreadable, ends the call with an error: the kernel's process tree is killed
(bwrap's pid namespace goes with it) and the next call starts a fresh kernel in the same folder, so the
files stay and the variables are lost, which the error says. Containers idle longer than
`idle_seconds` are reaped (kernel killed, folder removed); a new container past `max_containers` first
reaps the least recently used idle one, and is refused when every live one is busy.

Nothing here runs user code in the server's process: the server only spawns `bwrap`, writes JSON lines to
it and reads JSON lines back, with a cap on the line length.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

KERNEL = Path(__file__).with_name("kernel.py")
INSIDE_KERNEL = "/opt/harmony-kernel/kernel.py"
DATA = "/mnt/data"
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
UID_BASE = 1_900_000_000  # the pool of unprivileged uids the kernels run as when the server is root
START_TIMEOUT = 20.0  # seconds for a kernel to say it is ready
MAX_LISTED_FILES = 1000


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot start a sandbox here; names what failed."""


class CellEnd(Enum):
    """How a call to a kernel ended."""

    RAN = "ran"  # the code ran; it may still have raised (its traceback is the output)
    LIMIT = "limit"  # the code hit the CPU, memory or process limit: an error, the kernel and its state kept
    TIMEOUT = "timeout"  # wall-clock timeout: the kernel was killed and its state lost
    DIED = "died"  # the kernel exited or was killed by a limit (memory, CPU life): state lost
    REFUSED = "refused"  # no kernel could be started (too many containers busy, or the sandbox failed)


@dataclass(frozen=True)
class SandboxConfig:
    """The limits of every container; `harmony-responses serve --code-interpreter ...` sets them."""

    root: str = ""  # folder holding the containers' scratch folders; "" is a new temporary folder
    python: str = ""  # the interpreter run inside; "" is the server's own (sys.executable)
    bwrap: str = "bwrap"
    timeout: float = 120.0  # wall-clock seconds per call (the python tool's description promises 120)
    cpu_seconds: int = 60  # CPU seconds per call (SIGXCPU: the call ends with an error, state kept)
    cpu_life_seconds: int = 1800  # CPU seconds over a kernel's life (then it is killed)
    memory_bytes: int = 1024 * 1024 * 1024  # address space of the kernel and of each child
    file_bytes: int = 256 * 1024 * 1024  # largest file a call may write
    tmp_bytes: int = 64 * 1024 * 1024  # size of the private /tmp
    processes: int = 64  # processes and threads of one container
    output_bytes: int = 64 * 1024  # stdout and stderr (bytes) and the shown value (characters) are each cut there
    idle_seconds: float = 1200.0  # a container unused this long is reaped
    max_containers: int = 16


@dataclass(frozen=True)
class CellResult:
    end: CellEnd
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: str | None = None  # the cell's traceback (RAN) or why the kernel went (others)
    truncated: bool = False

    @property
    def failed(self) -> bool:
        """True when the sandbox ended the call (timeout, limit, death, refusal), not the code."""
        return self.end is not CellEnd.RAN

    def text(self) -> str:
        """The python tool's message to the model: output, then the value shown, then the error."""
        parts = [p for p in (self.stdout, self.stderr) if p]
        if self.result is not None:
            parts.append(self.result)
        if self.error:
            parts.append(self.error)
        if self.truncated:
            parts.append("[output truncated]")
        return "\n".join(p.rstrip("\n") for p in parts)


@dataclass(frozen=True)
class ContainerFile:
    id: str
    path: str  # as the code sees it, under /mnt/data
    bytes: int
    created_at: int


def file_id(container_id: str, path: str) -> str:
    """A stable id for a path in a container (the same file keeps its id across listings)."""
    return "cfile_" + hashlib.sha256(f"{container_id}\0{path}".encode()).hexdigest()[:32]


class Kernel:
    """One kernel process inside bwrap; `run` one cell at a time."""

    def __init__(self, argv: list[str], line_limit: int) -> None:
        self.argv = argv
        self.line_limit = line_limit
        self.process: asyncio.subprocess.Process | None = None
        self.sent = 0  # requests numbered, so a stale line (a forked child's) is never taken for the answer

    async def start(self) -> None:
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                start_new_session=True,
                limit=self.line_limit,
            )
        except OSError as exc:
            raise SandboxUnavailable(f"the sandbox could not be started: {exc}") from None
        try:
            line = await asyncio.wait_for(self._line(), START_TIMEOUT)
        except (TimeoutError, asyncio.LimitOverrunError, ValueError):
            line = b""
        if not line.startswith(b'{"ready"'):
            await self.kill()
            stderr = await self._stderr()
            raise SandboxUnavailable(f"the sandboxed kernel did not start: {stderr or line.decode(errors='replace')}")

    async def _line(self) -> bytes:
        assert self.process is not None and self.process.stdout is not None
        return await self.process.stdout.readline()

    async def _stderr(self) -> str:
        if self.process is None or self.process.stderr is None:
            return ""
        with contextlib.suppress(Exception):
            data = await asyncio.wait_for(self.process.stderr.read(4096), 1.0)
            return data.decode(errors="replace").strip()
        return ""

    async def _answer(self, number: int) -> bytes:
        """The next line answering request `number` (b"" at the end of the output)."""
        while True:
            line = await self._line()
            if not line:
                return line
            try:
                reply = json.loads(line)
            except ValueError:
                return line
            if not isinstance(reply, dict) or reply.get("n") == number:
                return line

    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def run(self, code: str, timeout: float) -> CellResult:
        assert self.process is not None and self.process.stdin is not None
        try:
            self.sent += 1
            self.process.stdin.write(json.dumps({"n": self.sent, "code": code}).encode() + b"\n")
            await self.process.stdin.drain()
            line = await asyncio.wait_for(self._answer(self.sent), timeout)
        except TimeoutError:
            await self.kill()
            return CellResult(
                CellEnd.TIMEOUT,
                error=f"Execution timed out after {timeout:g} seconds; the kernel was restarted and its "
                "variables were lost (files in /mnt/data were kept).",
            )
        except (ValueError, asyncio.LimitOverrunError, ConnectionError, BrokenPipeError):
            line = b""  # ValueError: a line past the limit (the kernel's own output is capped)
        try:
            reply: dict[str, Any] = json.loads(line) if line else {}
        except ValueError:
            reply = {}
        if not isinstance(reply, dict) or "stdout" not in reply:
            await self.kill()
            code_ = self.process.returncode
            how = ""
            if code_ is not None and code_ not in (0, 255):  # 255: asyncio could not read the status
                how = f" (signal {-code_})" if code_ < 0 else f" (exit status {code_})"
            return CellResult(
                CellEnd.DIED,
                error=f"The kernel stopped{how}: the code exited it, or it was killed on a memory, CPU or process "
                "limit. It was restarted and its variables were lost (files in /mnt/data were kept).",
            )
        if reply.get("restart"):
            await self.kill()
            error = str(reply.get("error") or "") + (
                "\nThe processes this code started could not all be ended: the kernel was restarted and its "
                "variables were lost (files in /mnt/data were kept)."
            )
            return CellResult(CellEnd.DIED, stdout=str(reply.get("stdout") or ""), error=error.lstrip("\n"))
        return CellResult(
            CellEnd.LIMIT if reply.get("limit") else CellEnd.RAN,
            stdout=str(reply.get("stdout") or ""),
            stderr=str(reply.get("stderr") or ""),
            result=reply.get("result") if isinstance(reply.get("result"), str) else None,
            error=reply.get("error") if isinstance(reply.get("error"), str) else None,
            truncated=bool(reply.get("truncated")),
        )

    async def kill(self) -> None:
        process = self.process
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(process.wait(), 10)
        if process.stdin is not None:
            process.stdin.close()


@dataclass
class Container:
    id: str
    folder: Path
    slot: int
    created_at: int
    last_active: float
    name: str = ""
    owner: str | None = None  # the API key's owner that made it (None: whoever holds the id)
    kernel: Kernel | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    calls: int = 0

    def busy(self) -> bool:
        return self.lock.locked()


class Sandbox:
    """The live containers of this server process, their kernels, and the reaper."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.as_root = os.geteuid() == 0
        self._own_root = not config.root
        self.root = Path(config.root or tempfile.mkdtemp(prefix="harmony-containers-"))
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)
        for stale in self.root.glob("cntr_*"):  # a previous server's containers: not live in this one
            shutil.rmtree(stale, ignore_errors=True)
        self.python = config.python or sys.executable
        self.containers: dict[str, Container] = {}
        self._free_slots = list(range(config.max_containers))
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False

    # -- the sandbox command ------------------------------------------------------------------------------

    def _python_folders(self) -> list[str]:
        """The interpreter's folders outside the system ones (a virtual environment, /opt/python...)."""
        candidates = [
            os.path.dirname(os.path.dirname(p)) for p in (os.path.abspath(self.python), os.path.realpath(self.python))
        ]
        if self.python == sys.executable:
            candidates += [sys.prefix, sys.base_prefix, sys.exec_prefix]
        outside = {
            f
            for f in candidates
            if f not in ("", "/") and not any(f == s or f.startswith(s + "/") for s in SYSTEM_FOLDERS)
        }
        return sorted(outside)

    def command(self, container: Container) -> list[str]:
        """The argv that starts the container's kernel.

        As root, bwrap makes the namespaces itself (no user namespace) and keeps only CAP_SETUID/CAP_SETGID
        for `setpriv`, which drops to the container's pool uid, every capability and the bounding set, with
        no_new_privs, before the interpreter starts: the kernel is then an ordinary unprivileged process
        outside too, which the process-count limit binds (root, or root mapped into a user namespace, is
        exempt from it). As another user, bwrap runs the kernel inside a user namespace as that user.
        """
        c = self.config
        argv = [c.bwrap, "--die-with-parent", "--new-session", "--clearenv"]
        if self.as_root:
            argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        else:
            argv += ["--unshare-all", "--unshare-user"]
        for folder in SYSTEM_FOLDERS:
            argv += ["--ro-bind-try", folder, folder]
        # The private /tmp comes before the interpreter's folders: an interpreter under /tmp (a checkout's
        # virtual environment there) is bound on top of it instead of hidden by it.
        argv += ["--perms", "01777", "--size", str(c.tmp_bytes), "--tmpfs", "/tmp"]
        for folder in self._python_folders():
            argv += ["--ro-bind", folder, folder]
        argv += ["--perms", "0755", "--dir", os.path.dirname(INSIDE_KERNEL)]
        argv += ["--ro-bind", str(KERNEL), INSIDE_KERNEL, "--proc", "/proc", "--dev", "/dev"]
        argv += ["--tmpfs", "/mnt", "--bind", str(container.folder), DATA, "--remount-ro", "/mnt"]
        for name, value in (("HOME", "/tmp"), ("TMPDIR", "/tmp"), ("PATH", "/usr/bin:/bin"), ("LANG", "C.UTF-8")):
            argv += ["--setenv", name, value]
        argv += ["--setenv", "MPLBACKEND", "Agg", "--chdir", DATA]
        if self.as_root:
            uid = str(UID_BASE + container.slot)
            argv += ["--cap-add", "CAP_SETUID,CAP_SETGID", "setpriv", "--reuid", uid, "--regid", uid]
            argv += ["--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        limits = (c.memory_bytes, c.file_bytes, c.processes, c.cpu_seconds, c.cpu_life_seconds, c.output_bytes)
        argv += [self.python, "-I", INSIDE_KERNEL, *(str(v) for v in limits)]
        return argv

    async def check(self) -> None:
        """Start and stop one kernel; `SandboxUnavailable` naming why when that fails (run at start-up)."""
        if shutil.which(self.config.bwrap) is None:
            raise SandboxUnavailable(f"{self.config.bwrap!r} not found (Debian: apt-get install bubblewrap)")
        if not (os.path.isfile(self.python) and os.access(self.python, os.X_OK)):
            raise SandboxUnavailable(f"the sandbox's Python {self.python!r} is not an executable file")
        if self.as_root and shutil.which("setpriv") is None:
            raise SandboxUnavailable("setpriv not found (Debian: util-linux), needed to drop root in the sandbox")
        container = await self.create(name="start-up check")
        try:
            outcome = await self.execute(container, "1 + 1")
            if outcome.result != "2":
                raise SandboxUnavailable(f"the sandboxed kernel did not work: {outcome.text()!r}")
        finally:
            await self.delete(container.id)

    # -- containers ---------------------------------------------------------------------------------------

    def get(self, container_id: str) -> Container | None:
        return self.containers.get(container_id)

    @staticmethod
    def new_id() -> str:
        return "cntr_" + secrets.token_hex(24)

    async def create(self, name: str = "", owner: str | None = None, container_id: str | None = None) -> Container:
        """A new empty container (with `container_id` when given: one a response reserved); past the cap the
        least recently used idle one is reaped first."""
        if self._closed:
            raise SandboxUnavailable("the code interpreter is shutting down")
        self._ensure_reaper()
        if not self._free_slots:
            idle = [c for c in self.containers.values() if not c.busy()]
            if not idle:
                raise SandboxUnavailable(
                    f"every one of the {self.config.max_containers} code-interpreter containers is busy"
                )
            await self.delete(min(idle, key=lambda c: c.last_active).id)
        slot = self._free_slots.pop(0)
        container_id = container_id or self.new_id()
        folder = self.root / container_id
        folder.mkdir(mode=0o700)
        if self.as_root:
            os.chown(folder, UID_BASE + slot, UID_BASE + slot)
        container = Container(container_id, folder, slot, int(time.time()), time.monotonic(), name=name, owner=owner)
        self.containers[container_id] = container
        return container

    async def execute(self, container: Container, code: str, timeout: float | None = None) -> CellResult:
        """Run `code` in the container's kernel (started when there is none), one call at a time.

        The wall clock is `timeout` (the hosted loop's per-call timeout) capped by the configured one, less a
        little, so the kernel is killed here and the call ends with its error before the loop gives up on it;
        a call cancelled anyway (the response cancelled, the client gone) kills the kernel too.
        """
        limit = min(timeout or self.config.timeout, self.config.timeout)
        limit = max(0.5, limit - 0.5) if limit > 1 else limit
        async with container.lock:
            container.last_active = time.monotonic()
            container.calls += 1
            try:
                if container.kernel is None or not container.kernel.alive():
                    kernel = Kernel(self.command(container), line_limit=36 * self.config.output_bytes + 65536)
                    await kernel.start()
                    container.kernel = kernel
                outcome = await container.kernel.run(code, limit)
            except SandboxUnavailable as exc:
                outcome = CellResult(CellEnd.REFUSED, error=str(exc))
            except BaseException:
                if container.kernel is not None:  # cancelled mid-cell: the kernel is busy with it, end it
                    await asyncio.shield(container.kernel.kill())
                    container.kernel = None
                raise
            finally:
                container.last_active = time.monotonic()
            if outcome.end in (CellEnd.TIMEOUT, CellEnd.DIED, CellEnd.REFUSED) and container.kernel is not None:
                await container.kernel.kill()
                container.kernel = None
            return outcome

    def last_active_at(self, container: Container) -> int:
        """When the container was last used, in Unix seconds."""
        return int(time.time() - (time.monotonic() - container.last_active))

    def files(self, container: Container) -> list[ContainerFile]:
        """The regular files under the container's folder (its /mnt/data), oldest first, at most 1000."""
        found: list[ContainerFile] = []
        for dirpath, dirnames, filenames in os.walk(container.folder, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                full = Path(dirpath) / name
                try:
                    info = full.lstat()
                except OSError:
                    continue
                if not full.is_symlink() and full.is_file():
                    path = DATA + "/" + str(full.relative_to(container.folder))
                    found.append(ContainerFile(file_id(container.id, path), path, info.st_size, int(info.st_mtime)))
                if len(found) >= MAX_LISTED_FILES:
                    return found
        return sorted(found, key=lambda f: (f.created_at, f.path))

    def file_path(self, container: Container, ident: str) -> Path | None:
        """The host path of a listed file (by id), never one outside the container's folder."""
        for f in self.files(container):
            if f.id == ident:
                path = container.folder / f.path[len(DATA) + 1 :]
                real = Path(os.path.realpath(path))
                if real.is_relative_to(os.path.realpath(container.folder)) and real.is_file():
                    return real
        return None

    async def delete(self, container_id: str) -> bool:
        container = self.containers.pop(container_id, None)
        if container is None:
            return False
        if container.kernel is not None:
            await container.kernel.kill()
            container.kernel = None
        await asyncio.to_thread(shutil.rmtree, container.folder, True)
        self._free_slots.append(container.slot)
        self._free_slots.sort()
        return True

    async def reap(self) -> list[str]:
        """Delete the containers idle past `idle_seconds`; their ids."""
        now = time.monotonic()
        stale = [
            c.id for c in self.containers.values() if not c.busy() and now - c.last_active > self.config.idle_seconds
        ]
        for ident in stale:
            await self.delete(ident)
        return stale

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        every = max(0.2, min(30.0, self.config.idle_seconds / 4))
        while not self._closed:
            await asyncio.sleep(every)
            await self.reap()

    async def aclose(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reaper
        for ident in list(self.containers):
            await self.delete(ident)
        if self._own_root:
            await asyncio.to_thread(shutil.rmtree, self.root, True)
