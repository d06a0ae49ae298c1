"""A topic's followers (subscriptions, replicators): a dict that says when
it starts or stops holding any.

A topic needs its managed ledger's wake-up on new entries only while
someone follows it; at 10,000 written topics with nobody reading, waking
each after every commit was about 6 % of the broker's CPU (issue 41). So a
topic listens only while one of its follower maps is non-empty, and these
maps tell it, whoever changes them (the topic, cursor operations,
geo-replication). Reads are a plain dict's; every mutating method calls
``changed`` afterwards (it must not raise).
"""
from __future__ import annotations

from typing import Callable


class Followers(dict):
    __slots__ = ("_changed",)

    def __init__(self, changed: Callable[[], None]) -> None:
        super().__init__()
        self._changed = changed

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._changed()

    def pop(self, *args):
        try:
            return super().pop(*args)
        finally:
            self._changed()

    def popitem(self):
        try:
            return super().popitem()
        finally:
            self._changed()

    def setdefault(self, key, default=None):
        try:
            return super().setdefault(key, default)
        finally:
            self._changed()

    def update(self, *args, **kwargs) -> None:
        super().update(*args, **kwargs)
        self._changed()

    def clear(self) -> None:
        super().clear()
        self._changed()

    def __ior__(self, other):
        self.update(other)
        return self
