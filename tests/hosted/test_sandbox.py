"""The code interpreter's sandbox, for real: bubblewrap kernels on this machine (no server in between).

Each test starts real sandboxed kernels (`server/hosted/sandbox.py`) and runs code in them: state kept across
calls, no network (a 127.0.0.1 server the test runs is unreachable from inside), a read-only system and
no view of the server's files or environment, each limit ending its call as an error (fork bomb, runaway
loop, 10 GB allocation, sleeping past the wall clock, output past the cap), the files a call wrote listed,
idle containers reaped and the cap on live containers kept.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from services.bubblewrap import ensure_bwrap

from harmony_responses.server.hosted.sandbox import (
    UID_BASE,
    CellEnd,
    Sandbox,
    SandboxConfig,
    SandboxUnavailable,
)


@pytest.fixture(scope="module")
def bwrap() -> str:
    return ensure_bwrap()


def run(bwrap: str, body: Callable[[Sandbox], Awaitable[Any]], **limits: Any) -> Any:
    """`body(sandbox)` in a fresh event loop, with a sandbox of these limits, closed afterwards."""
    config = SandboxConfig(**{"bwrap": bwrap, "timeout": 20.0, "cpu_seconds": 3, **limits})

    async def main() -> Any:
        sandbox = Sandbox(config)
        try:
            return await body(sandbox)
        finally:
            await sandbox.aclose()
            assert not sandbox.root.exists(), "closing the sandbox removes every container's folder"

    return asyncio.run(main())


def processes_of(uid: int) -> list[str]:
    out = subprocess.run(["ps", "-u", str(uid), "-o", "pid=,comm="], capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_state_is_kept_across_calls_like_a_notebook(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        c = await sb.create()
        first = await sb.execute(c, "x = 41\nprint('hello')\nx + 1")
        assert first.end is CellEnd.RAN and first.stdout == "hello\n" and first.result == "42"
        assert first.text() == "hello\n42"
        assert (await sb.execute(c, "x")).result == "41"
        assert (await sb.execute(c, "def f(n):\n    return n * x\nf(2)")).result == "82"
        error = await sb.execute(c, "f(1) / 0")
        assert error.end is CellEnd.RAN and not error.failed  # the code's own exception: its traceback
        assert error.error is not None and "ZeroDivisionError" in error.error and "<cell 4>" in error.error
        assert "kernel.py" not in error.error, "the traceback shows the cell's frames, not the kernel's"
        assert (await sb.execute(c, "x = x + 1; x")).result == "42", "the kernel outlives an exception"
        child = await sb.execute(c, "import subprocess\nsubprocess.run(['sh', '-c', 'echo out; echo err >&2'])\n")
        assert child.stdout == "out\n" and child.stderr == "err\n", "a child process's output is caught too"
        other = await sb.create()
        assert "NameError" in ((await sb.execute(other, "x")).error or ""), "containers share nothing"

    run(bwrap, body)


def test_no_network_even_to_the_hosts_loopback(bwrap: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[Any] = []

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except (TimeoutError, OSError):
                continue

    stop = threading.Event()
    threading.Thread(target=accept, daemon=True).start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # the server is there: from the test's own process it answers
        deadline = time.monotonic() + 5
        while not accepted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(accepted) == 1
        code = (
            "import socket\n"
            "out = []\n"
            f"for host in ('127.0.0.1', '10.0.0.1', '1.1.1.1'):\n"
            "    try:\n"
            f"        socket.create_connection((host, {port}), timeout=3); out.append('connected')\n"
            "    except OSError as exc:\n"
            "        out.append(type(exc).__name__)\n"
            "out, [name for _, name in socket.if_nameindex()]\n"
        )

        async def body(sb: Sandbox) -> Any:
            return await sb.execute(await sb.create(), code)

        outcome = run(bwrap, body)
        assert outcome.end is CellEnd.RAN, outcome.text()
        assert outcome.result == "(['ConnectionRefusedError', 'OSError', 'OSError'], ['lo'])", outcome.result
        time.sleep(0.3)
        assert len(accepted) == 1, "nothing from inside the sandbox reached the host's 127.0.0.1 server"
    finally:
        stop.set()
        listener.close()


def test_read_only_system_and_nothing_of_the_server(bwrap: str, tmp_path: Path) -> None:
    os.environ["HARMONY_RESPONSES_API_KEYS"] = "sk-secret-of-the-server"
    try:
        code = (
            "import os\n"
            "def attempt(path):\n"
            "    try:\n"
            "        open(path, 'w').write('x'); return 'wrote'\n"
            "    except OSError as exc:\n"
            "        return type(exc).__name__\n"
            "def listing(path):\n"
            "    try:\n"
            "        return sorted(os.listdir(path))\n"
            "    except OSError as exc:\n"
            "        return type(exc).__name__\n"
            "[attempt(p) for p in ('/etc/x', '/usr/x', '/mnt/x', '/mnt/data/ok', '/tmp/ok')], "
            f"listing({str(tmp_path)!r}), listing('/root'), sorted(os.environ), os.getuid() != 0\n"
        )
        (tmp_path / "server-file").write_text("secret")

        async def body(sb: Sandbox) -> Any:
            return await sb.execute(await sb.create(), code)

        outcome = run(bwrap, body)
    finally:
        del os.environ["HARMONY_RESPONSES_API_KEYS"]
    assert outcome.end is CellEnd.RAN, outcome.text()
    assert outcome.result is not None
    writes, server_folder, root_home, env, unprivileged = eval(outcome.result)  # noqa: S307 - our own repr
    assert writes == ["OSError", "OSError", "OSError", "wrote", "wrote"], writes
    assert server_folder in ("FileNotFoundError", "PermissionError"), "the server's folders are not in the sandbox"
    assert root_home in ("FileNotFoundError", "PermissionError", [])
    assert env == ["HOME", "LANG", "MPLBACKEND", "PATH", "PWD", "TMPDIR"], "the server's environment is not passed in"
    assert unprivileged


def test_fork_bomb_ends_as_an_error_and_the_kernel_stays(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        c = await sb.create()
        await sb.execute(c, "kept = 'yes'")
        started = time.monotonic()
        bomb = await sb.execute(c, "import os\nwhile True:\n    os.fork()\n")
        assert bomb.failed and bomb.end in (CellEnd.LIMIT, CellEnd.DIED), bomb.text()
        assert "BlockingIOError" in (bomb.error or "") or "Resource temporarily unavailable" in (bomb.error or "")
        assert time.monotonic() - started < 20
        if bomb.end is CellEnd.LIMIT:  # the kernel ended every process the bomb made: it and its variables stay
            assert (await sb.execute(c, "kept")).result == "'yes'"
        else:  # it could not within its few seconds (a loaded machine): the whole sandbox was restarted
            assert "variables were lost" in bomb.text()
            assert (await sb.execute(c, "1")).result == "1"
        if sb.as_root:
            left = processes_of(UID_BASE + c.slot)
            assert len(left) <= 2, f"the bomb's processes were ended: {left}"
        threads = await sb.execute(
            c, "import threading, time\n[threading.Thread(target=time.sleep, args=(3,)).start() for _ in range(500)]"
        )
        assert threads.end is CellEnd.LIMIT, threads.text()
        assert "can't start new thread" in (threads.error or "")

    run(bwrap, body, processes=32)


def test_runaway_loop_ends_on_the_cpu_limit_and_the_state_is_kept(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        c = await sb.create()
        await sb.execute(c, "kept = 1")
        loop = await sb.execute(c, "while True:\n    pass\n")
        assert loop.end is CellEnd.LIMIT and loop.failed, loop.text()
        assert "CPU time limit" in (loop.error or "")
        assert (await sb.execute(c, "kept + 1")).result == "2"
        again = await sb.execute(c, "n = 0\nwhile True:\n    n += 1\n")  # the allowance is per call, not per kernel
        assert again.end is CellEnd.LIMIT, again.text()

    run(bwrap, body, cpu_seconds=1)


def test_sleeping_past_the_wall_clock_restarts_the_kernel(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        c = await sb.create()
        await sb.execute(c, "kept = 1\nopen('/mnt/data/stays.txt', 'w').write('x')")
        started = time.monotonic()
        slow = await sb.execute(c, "import time\ntime.sleep(60)")
        assert slow.end is CellEnd.TIMEOUT and slow.failed
        assert time.monotonic() - started < 10
        assert "timed out" in slow.text() and "variables were lost" in slow.text()
        lost = await sb.execute(c, "kept")
        assert "NameError" in (lost.error or ""), "a fresh kernel"
        assert (await sb.execute(c, "open('/mnt/data/stays.txt').read()")).result == "'x'", "files are kept"
        died = await sb.execute(c, "import os\nos._exit(3)")
        assert died.end is CellEnd.DIED and "kernel stopped" in died.text()
        assert (await sb.execute(c, "1 + 1")).result == "2"

    run(bwrap, body, timeout=3.0)


def test_ten_gigabytes_is_a_memory_error(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        c = await sb.create()
        await sb.execute(c, "kept = 1")
        for code in (
            "b = bytearray(10 * 1024**3)",
            "s = 'x' * (10 * 1024**3)",
            "x = []\nwhile True: x.append(bytes(10**7))",
        ):
            big = await sb.execute(c, code)
            assert big.end is CellEnd.LIMIT and big.failed, big.text()
            assert "MemoryError" in (big.error or "")
        assert (await sb.execute(c, "kept")).result == "1"

    run(bwrap, body, memory_bytes=512 * 1024 * 1024)


def test_output_is_capped(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        c = await sb.create()
        out = await sb.execute(
            c, "print('a' * 100_000)\nimport os; os.system('head -c 100000 /dev/zero | tr \"\\\\0\" b >&2')"
        )
        assert out.end is CellEnd.RAN and out.truncated
        assert len(out.stdout) == 1000 and len(out.stderr) == 1000
        assert out.text().endswith("[output truncated]")
        shown = await sb.execute(c, "'c' * 100_000")
        assert shown.result is not None and len(shown.result) == 1000 and shown.truncated
        flood = await sb.execute(c, "import sys\nfor _ in range(100): sys.stdout.write('d' * 1_000_000)")
        assert flood.truncated and len(flood.stdout) == 1000, "a flood past the file-size limit is still one answer"
        assert (await sb.execute(c, "1")).result == "1"

    run(bwrap, body, output_bytes=1000, file_bytes=10 * 1024 * 1024)


def test_files_written_are_listed(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        c = await sb.create()
        assert sb.files(c) == []
        await sb.execute(
            c,
            "import os\nos.makedirs('/mnt/data/sub', exist_ok=True)\n"
            "open('/mnt/data/report.csv', 'w').write('a,b\\n1,2\\n')\n"
            "open('sub/notes.txt', 'w').write('relative paths land in /mnt/data')\n"
            "os.symlink('/etc/passwd', '/mnt/data/link')\n",
        )
        files = {f.path: f for f in sb.files(c)}
        assert set(files) == {"/mnt/data/report.csv", "/mnt/data/sub/notes.txt"}, "symlinks are not listed"
        assert files["/mnt/data/report.csv"].bytes == 8
        report = files["/mnt/data/report.csv"]
        assert report.id == {f.path: f for f in sb.files(c)}["/mnt/data/report.csv"].id, "ids are stable"
        path = sb.file_path(c, report.id)
        assert path is not None and path.read_text() == "a,b\n1,2\n"
        assert sb.file_path(c, "cfile_nope") is None

    run(bwrap, body)


def test_idle_containers_are_reaped(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        c = await sb.create()
        await sb.execute(c, "x = 1")
        assert c.kernel is not None and c.kernel.process is not None
        pid = c.kernel.process.pid
        kept = await sb.create()
        deadline = time.monotonic() + 15
        while (c.id in sb.containers or c.folder.exists()) and time.monotonic() < deadline:
            await sb.execute(kept, "1")  # used: never reaped
            await asyncio.sleep(0.2)  # (a reaped container leaves the list first, then its kernel and folder go)
        assert c.id not in sb.containers and kept.id in sb.containers
        assert not c.folder.exists()
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()

    run(bwrap, body, idle_seconds=1.0)


def test_live_containers_are_capped(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        first = await sb.create()
        second = await sb.create()
        await sb.execute(second, "1")
        third = await sb.create()  # past the cap: the least recently used idle one goes
        assert first.id not in sb.containers and {second.id, third.id} == set(sb.containers)
        busy = [asyncio.ensure_future(sb.execute(c, "import time; time.sleep(2)")) for c in (second, third)]
        await asyncio.sleep(0.5)
        with pytest.raises(SandboxUnavailable, match="busy"):
            await sb.create()
        await asyncio.gather(*busy)

    run(bwrap, body, max_containers=2)


def test_a_cancelled_call_ends_its_kernel(bwrap: str) -> None:
    async def body(sb: Sandbox) -> None:
        c = await sb.create()
        task = asyncio.ensure_future(sb.execute(c, "import time; time.sleep(60)"))
        await asyncio.sleep(1.0)
        assert c.kernel is not None and c.kernel.process is not None
        process = c.kernel.process
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert process.returncode is not None and c.kernel is None
        assert (await sb.execute(c, "2 + 2")).result == "4"

    run(bwrap, body)


def test_a_server_that_is_not_root_gets_the_same_sandbox(bwrap: str, tmp_path: Path) -> None:
    """As another user, bwrap makes a user namespace itself: no network, and the process limit still binds."""
    import json
    import sys

    import harmony_responses.server.hosted.sandbox as sandbox_module

    python = "/usr/bin/python3" if os.geteuid() == 0 else sys.executable
    # The other user reads the script, the sandbox module and its kernel from a folder of their own: the checkout
    # may sit under a folder only root may enter (a CI clone in a private temporary folder).
    shared = Path(tempfile.mkdtemp(prefix="sandbox-unprivileged-", dir="/var/tmp"))
    shared.chmod(0o755)
    module = Path(sandbox_module.__file__)
    for source in (Path(__file__).with_name("sandbox_unprivileged.py"), module, module.with_name("kernel.py")):
        shutil.copy(source, shared / source.name)
    argv = [python, str(shared / "sandbox_unprivileged.py"), str(shared / module.name)]
    if os.geteuid() == 0:
        tmp_path.chmod(0o777)
        argv = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", *argv]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
        )
    finally:
        shutil.rmtree(shared)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["as_root"] is False
    assert got["uid"]["text"] == f"({65534 if os.geteuid() == 0 else os.geteuid()}, 7)"
    assert got["fork"]["end"] in ("limit", "died") and "Resource temporarily unavailable" in got["fork"]["text"]
    assert got["net"]["end"] == "ran" and "ConnectionRefusedError" in got["net"]["text"]
