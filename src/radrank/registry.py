"""One lazy registry, used for metrics, generation backbones and dataset adapters.

A registry maps names to ``"package.module:attribute"`` strings; an entry is imported the first
time it is asked for, so importing a registry (and listing its names) costs no import of the
entries' modules, and a module that fails to import breaks only its own entries.
"""

from __future__ import annotations

import importlib
import threading


class Registry:
    def __init__(self, kind: str, entries: dict[str, str]):
        self.kind = kind  # "metric", "backbone", "dataset": used in messages
        self._entries = dict(entries)
        self._loaded: dict = {}
        self._lock = threading.Lock()  # the workflow's in-process jobs run in threads

    def names(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self._entries)

    def location(self, name: str) -> tuple[str, str]:
        """(module, attribute) of ``name``."""
        if name not in self._entries:
            raise KeyError(f"unknown {self.kind} {name!r}; known {self.kind}s: {', '.join(self._entries)}")
        module, _, attribute = self._entries[name].partition(":")
        return module, attribute

    def module(self, name: str):
        return importlib.import_module(self.location(name)[0])

    def get(self, name: str):
        if name in self._loaded:
            return self._loaded[name]
        module, attribute = self.location(name)
        with self._lock:
            if name not in self._loaded:
                self._loaded[name] = getattr(importlib.import_module(module), attribute)
        return self._loaded[name]
