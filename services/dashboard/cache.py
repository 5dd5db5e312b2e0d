"""A thread-safe LRU bounded by bytes, whose loads run once per key however many ask at once.

Fifty viewers opening the same episode should decode its frames once, not fifty times.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


def _size(value: Any) -> int:
    n = getattr(value, "nbytes", None)
    if n is None and isinstance(value, (bytes, bytearray)):
        n = len(value)
    return int(n or 64)


class ByteLRU:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Event] = {}
        self.hits = self.misses = 0

    def peek(self, key: Hashable) -> Any | None:
        """The cached value, or None; never loads."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
                self.hits += 1
            return value

    def get_or_load(self, key: Hashable, load: Callable[[], Any]) -> Any:
        while True:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    self.hits += 1
                    return self._items[key]
                pending = self._loading.get(key)
                if pending is None:
                    pending = self._loading[key] = threading.Event()
                    self.misses += 1
                    break
            pending.wait()  # another thread is loading it; then look again (it may be too big to keep)
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    self.hits += 1
                    return self._items[key]
            return load()
        try:
            value = load()
            self._put(key, value)
            return value
        finally:
            with self._lock:
                self._loading.pop(key, None)
            pending.set()

    def put(self, key: Hashable, value: Any) -> None:
        """Keep a value loaded elsewhere (dropped at once when larger than the whole budget)."""
        self._put(key, value)

    def _put(self, key: Hashable, value: Any) -> None:
        size = _size(value)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._items:
                self._bytes -= _size(self._items.pop(key))
            self._items[key] = value
            self._bytes += size
            while self._bytes > self.max_bytes and self._items:
                _, old = self._items.popitem(last=False)
                self._bytes -= _size(old)

    def discard(self, match: Callable[[Hashable], bool]) -> None:
        with self._lock:
            for k in [k for k in self._items if match(k)]:
                self._bytes -= _size(self._items.pop(k))

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)
