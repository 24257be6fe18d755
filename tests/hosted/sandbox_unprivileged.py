"""Run by test_sandbox.py as an unprivileged user: the sandbox as a server not running as root would use it.

Loads `server/hosted/sandbox.py` by path (it imports only the standard library, so the system's Python can run
it without the project installed), runs a few calls in a container and prints one JSON line of what came back.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from typing import Any


async def main(path: str) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("sandbox", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sandbox"] = mod
    spec.loader.exec_module(mod)
    sandbox = mod.Sandbox(mod.SandboxConfig(python=sys.executable, processes=16, cpu_seconds=2, timeout=20))
    out: dict[str, Any] = {"as_root": sandbox.as_root}
    try:
        await sandbox.check()
        c = await sandbox.create()
        for name, code in (
            ("state", "x = 7"),
            ("uid", "import os; os.getuid(), x"),
            ("fork", "import os\nwhile True:\n    os.fork()"),
            ("after", "x"),
            ("net", "import socket; socket.create_connection(('127.0.0.1', 22), timeout=2)"),
        ):
            r = await sandbox.execute(c, code)
            out[name] = {"end": r.end.value, "text": r.text()}
    finally:
        await sandbox.aclose()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
