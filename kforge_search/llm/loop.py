"""One asyncio event loop, in a daemon thread, for every LLM call of this process.

The providers are async SDK clients, and an async client belongs to the loop it was first
used on. Agents in several threads (the lineages of a generation propose side by side) hand
their calls to this one loop and wait for them in their own thread (`run`), so calls overlap
without one client crossing loops. `cancel_all` ends every call in flight (a search that
was interrupted does not wait for a slow provider).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_state: dict[str, Any] = {}  # "loop", "pid"


def _loop() -> asyncio.AbstractEventLoop:
    with _lock:
        loop = _state.get("loop")
        if loop is None or loop.is_closed() or _state.get("pid") != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="kforge-llm", daemon=True).start()
            _state.update(loop=loop, pid=os.getpid())
        return loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the shared loop and wait for its result in this thread."""
    future = asyncio.run_coroutine_threadsafe(coro, _loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()  # interrupted while waiting: the call ends too
        raise


def cancel_all() -> int:
    """Cancel every call in flight; how many there were."""
    loop = _state.get("loop")
    if loop is None or loop.is_closed() or _state.get("pid") != os.getpid():
        return 0

    done: concurrent.futures.Future[int] = concurrent.futures.Future()

    def cancel() -> None:  # on the loop's thread
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in tasks:
            task.cancel()
        done.set_result(len(tasks))

    loop.call_soon_threadsafe(cancel)
    return done.result(timeout=10)
