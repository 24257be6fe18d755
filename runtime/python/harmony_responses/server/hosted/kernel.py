"""The Python kernel that runs inside a code-interpreter sandbox (never in the server's process).

`sandbox.py` starts this file with the sandbox's Python, inside bubblewrap, as an unprivileged uid. It
speaks JSON lines on the stdin/stdout it was started with: one request `{"n": 1, "code": "..."}` in, one reply
`{"n", "stdout", "stderr", "result", "error", "truncated"}` out (and `limit`: "cpu", "memory" or
"processes" when the cell ended on one of the sandbox's limits, and `restart` when the processes a cell
started could not all be ended: the server then restarts the sandbox). The code runs in one namespace kept across
requests, as a notebook cell: the value of a last bare expression is shown (its `repr`), as a notebook shows
`Out[n]`; an exception is reported as its traceback (the cell's own frames only), and the kernel stays up.

Before it reads any code it sets its own limits from its arguments (trusted code at that point; a cell can
lower them, never raise a hard limit): address space, file size, process count, and CPU time; and it drops to
the lowest CPU priority (nice 19, SCHED_IDLE), so a runaway cell never takes the CPU from the server. CPU time is
given per cell: the soft limit is moved to the time used so far plus the per-cell allowance before each cell,
so a runaway cell gets SIGXCPU, which ends the cell as an error and keeps the state; the hard limit (the
kernel's whole life) kills it outright. The cell's output goes to two files on the sandbox's private /tmp
(file descriptors 1 and 2, so output of child processes is caught too) and is read back capped; the
protocol uses duplicated descriptors the cell's `print` never reaches. This module imports only the
standard library: the sandbox's Python may be any Python 3.
"""

from __future__ import annotations

import ast
import json
import linecache
import os
import resource
import signal
import sys
import time
import traceback
from typing import Any, TextIO


class CellCpuLimit(Exception):
    """The cell used its CPU-time allowance (SIGXCPU)."""


def _on_xcpu(signum: int, frame: Any) -> None:
    raise CellCpuLimit("CPU time limit for this cell reached")


def _limit(which: int, value: int) -> None:
    if value > 0:
        resource.setrlimit(which, (value, value))


def _lowest_priority() -> None:
    """Nice 19 and the idle scheduling class, for the kernel and all it starts (neither can be undone without a
    privilege the kernel lacks): code that spins or forks takes only the CPU the server and the engine leave."""
    try:
        os.nice(19)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        pass
    resource.setrlimit(resource.RLIMIT_NICE, (0, 0))


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Capture:
    """fd 1 and 2 of the kernel point at two files; after a cell, their new bytes are read back, capped."""

    def __init__(self, folder: str) -> None:
        self.files = []
        for fd, name in ((1, "stdout"), (2, "stderr")):
            path = os.path.join(folder, f".kernel-{name}")
            out = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
            os.dup2(out, fd)
            os.close(out)
            self.files.append(fd)
        sys.stdout = os.fdopen(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
        sys.stderr = os.fdopen(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)

    def take(self, cap: int) -> tuple[str, str, bool]:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        texts = []
        truncated = False
        for fd in self.files:
            size = os.fstat(fd).st_size
            data = os.pread(fd, cap, 0) if size else b""
            truncated = truncated or size > cap
            os.ftruncate(fd, 0)
            texts.append(data.decode("utf-8", errors="replace"))
        return texts[0], texts[1], truncated


def _cell_traceback(exc: BaseException, filename: str) -> str:
    """The exception as a notebook shows it: the cell's frames and what they called, never the kernel's."""
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        return "".join(traceback.format_exception_only(type(exc), exc))
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    frames = [f for f in traceback.extract_tb(tb) if f.filename != __file__]
    head = "Traceback (most recent call last):\n" if frames else ""
    body = "".join(traceback.StackSummary.from_list(frames).format())
    return head + body + "".join(traceback.format_exception_only(type(exc), exc))


def _limit_name(exc: BaseException | None) -> str | None:
    """Which sandbox limit ended the cell, when one did."""
    if isinstance(exc, CellCpuLimit):
        return "cpu"
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, BlockingIOError) or (isinstance(exc, OSError) and exc.errno == 11):
        return "processes"  # fork() past RLIMIT_NPROC: EAGAIN
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "processes"  # a thread past RLIMIT_NPROC
    return None


def _end_other_processes(seconds: float = 5.0) -> bool:
    """SIGKILL every process this one may signal (in the sandbox's pid namespace: what the cell started), until
    none is left but this one and the namespace's init, reaping this one's own children as they die. False
    when some were still there after `seconds` (the server then restarts the whole sandbox)."""
    me = os.getpid()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (me, 1) and _alive(p)]:
            return True
        time.sleep(0.01)
    return False


def _alive(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_cell(code: str, number: int, namespace: dict[str, Any]) -> tuple[str | None, BaseException | None]:
    """(repr of the last expression's value or None, the exception the cell raised or None)."""
    filename = f"<cell {number}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    try:
        tree = ast.parse(code, filename, "exec")
        last = None
        final = tree.body[-1] if tree.body else None
        if isinstance(final, ast.Expr):
            tree.body.pop()
            last = ast.Expression(final.value)
        exec(compile(tree, filename, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, filename, "eval"), namespace)
            if value is not None:
                namespace["_"] = value
                return repr(value), None
        return None, None
    except BaseException as exc:  # noqa: BLE001 - every failure of the cell is the cell's result
        return None, exc


def main(argv: list[str]) -> int:
    memory, file_size, nproc, cpu_cell, cpu_life, output_cap = (int(a) for a in argv[1:7])
    proto_in: TextIO = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out: TextIO = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    capture = Capture(os.environ.get("TMPDIR", "/tmp"))
    signal.signal(signal.SIGXCPU, _on_xcpu)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file past the size limit is an OSError, not a kill
    _lowest_priority()
    _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_FSIZE, file_size)
    _limit(resource.RLIMIT_NPROC, nproc)
    _limit(resource.RLIMIT_CORE, 0)
    if cpu_life > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_life, cpu_life))
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    os.chdir("/mnt/data")
    proto_out.write(json.dumps({"ready": True}) + "\n")
    proto_out.flush()
    number = 0
    kernel_pid = os.getpid()
    for line in proto_in:
        request = json.loads(line)
        number += 1
        hard = cpu_life if cpu_life > 0 else resource.RLIM_INFINITY
        if cpu_cell > 0:
            soft = int(_cpu_used()) + cpu_cell
            resource.setrlimit(resource.RLIMIT_CPU, (min(soft, hard), hard))
        result, exc = run_cell(str(request.get("code", "")), number, namespace)
        if os.getpid() != kernel_pid:
            os._exit(0)  # a child the cell forked came back here: it must never answer
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))  # between cells only the life limit holds
        except (ValueError, OSError):
            pass  # the cell lowered the hard limit itself
        error = _cell_traceback(exc, f"<cell {number}>") if exc is not None else None
        limit = _limit_name(exc)
        restart = limit == "processes" and not _end_other_processes()  # what a fork bomb left
        exc = None  # the traceback's frames hold the cell's locals (a 10 GB attempt, say): let them go
        stdout, stderr, truncated = capture.take(output_cap)
        if result is not None and len(result) > output_cap:
            result, truncated = result[:output_cap], True
        if error is not None and len(error) > output_cap:
            error, truncated = error[-output_cap:], True
        reply = {
            "n": request.get("n"),
            "stdout": stdout,
            "stderr": stderr,
            "result": result,
            "error": error,
            "truncated": truncated,
        }
        if limit is not None:
            reply["limit"] = limit
        if restart:
            reply["restart"] = True
        proto_out.write(json.dumps(reply) + "\n")
        proto_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
