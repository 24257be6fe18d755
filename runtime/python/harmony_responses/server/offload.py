"""CPU-heavy request steps run on worker threads, so one request cannot pause another's stream.

The event loop only switches between requests; reading a large JSON body, validating it, and rendering
and tokenizing a long input are done on a small thread pool (`off_loop`) once the body is larger than
`OFFLOAD_BYTES`. Below that the work takes well under a millisecond and a thread hop would cost more
than it saves. A Python-level step on a worker thread gives the loop the interpreter back every
`sys.getswitchinterval()`, which is lowered from Python's 5 ms to `SWITCH_INTERVAL_S` once the pool
exists: the loop gives the interpreter up at every socket call and waits that long to get it back, so
at 5 ms one `/health` answer took a few hundred milliseconds while a large request was planned. The
interval only matters while two threads want the interpreter. tiktoken releases it while it encodes.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

OFFLOAD_BYTES = 64 * 1024  # bodies larger than this are read, checked and planned off the event loop
_THREADS = 4
SWITCH_INTERVAL_S = 0.0005

_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        _pool = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="request-cpu")
    return _pool


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` on a worker thread; its exceptions are raised here."""
    return await asyncio.get_running_loop().run_in_executor(_executor(), functools.partial(fn, *args, **kwargs))


async def maybe_off_loop(size: int, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(...)` on a worker thread when `size` (the body's bytes) is over `OFFLOAD_BYTES`, else right here."""
    if size > OFFLOAD_BYTES:
        return await off_loop(fn, *args, **kwargs)
    return fn(*args, **kwargs)
