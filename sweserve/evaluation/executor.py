"""Where trials run: the seam between deciding what to run and running it.

`LocalExecutor` runs work items on threads of this process against one Context. A distributed executor
(Ray) implements the same `map_unordered`, building a Context from `ctx.spec()` in each worker, so a
remote worker runs the very same functions (`run_trial`, `validate_task`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Protocol, TypeVar

from sweserve.evaluation.context import Context

Item = TypeVar("Item")
Out = TypeVar("Out")


class Executor(Protocol):
    def map_unordered(self, fn: Callable[[Context, Item], Out], items: Iterable[Item]) -> Iterator[Out]:
        """fn(ctx, item) for every item, yielded as each finishes. On an exception (Ctrl-C included) nothing
        queued starts; what runs loses its sandboxes when the context closes."""


class LocalExecutor:
    def __init__(self, ctx: Context, workers: int = 1):
        self.ctx = ctx
        self.workers = max(1, workers)

    def map_unordered(self, fn: Callable[[Context, Item], Out], items: Iterable[Item]) -> Iterator[Out]:
        pool = ThreadPoolExecutor(max_workers=self.workers)
        try:
            futures = [pool.submit(fn, self.ctx, item) for item in items]
            for fut in as_completed(futures):
                yield fut.result()
        except BaseException:
            self.ctx.cancel()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
