"""A coroutine run from a callback, as its task would run it, for as long as it does not suspend.

The streamed answer's per-token path runs in the engine connection's `data_received` (see
`exchange.EngineCall`), not in the stream's task: waking the task per token costs a loop turn, a task
step and a frame resumed per layer. The client write is an ASGI `send`, a coroutine; uvicorn's
completes without suspending unless the client's transport paused writing. `start(coro, task)` runs its
first step at once, with `task` as the current task while it runs (so whatever the send looks up with
`asyncio.current_task()`, such as a cancel scope, finds the stream's task), and gives back either None
(it completed: the common case) or a `Rest`, an awaitable the task awaits to finish the coroutine where
it stopped: every value the coroutine yields (the future it waits on) passes through to the task, and
every value or exception the task is resumed with passes back in, so a send that suspends behaves as if
the task had awaited it from the start. This is Python 3.12's eager task start, done by hand on 3.11
(`asyncio.tasks._enter_task` is the hook the C tasks use; without it, `start` is never called:
`AVAILABLE` is False and the caller keeps to its task).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Generator
from typing import Any

_enter = getattr(asyncio.tasks, "_enter_task", None)
_leave = getattr(asyncio.tasks, "_leave_task", None)
AVAILABLE = _enter is not None and _leave is not None


class Rest:
    """The rest of a coroutine whose first step suspended on `yielded`: await it (in the task) to finish it."""

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Generator[Any, Any, Any], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self._coro, self._yielded
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # the task was cancelled (or thrown into): so is the coroutine, where it waits
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value

    def close(self) -> None:
        """Drop the coroutine unfinished (its `finally` blocks run)."""
        self._coro.close()


def start(awaitable: Awaitable[Any], task: asyncio.Task[Any]) -> Rest | None:
    """Run `awaitable` (a coroutine, or any awaitable an ASGI `send` returns) now, as `task`, up to its end (None)
    or its first suspension (a `Rest` for `task` to await).

    Call it from a callback (no task running on the loop; from inside a task, nothing runs now and the whole
    coroutine is the `Rest`); an exception the first step raises is raised here.
    """
    assert _enter is not None and _leave is not None
    coro = awaitable.__await__()  # a generator (a coroutine's own iterator): send, throw and close
    loop = task.get_loop()
    try:
        _enter(loop, task)
    except RuntimeError:  # called from inside another task after all: the task runs all of it, from the start
        return Rest(coro, None)  # a bare yield first: the task resumes it on its next step
    try:
        yielded = coro.send(None)
    except StopIteration:
        return None
    finally:
        _leave(loop, task)
    return Rest(coro, yielded)
