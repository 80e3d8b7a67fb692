"""The one registry pattern used across OpenHLO.

Ops, interpreter kernels, passes, pipelines, hardware descriptions and backends
are each kept in a ``Registry``. The rules (see shared/design/house-style.md):

* registering a name twice raises unless ``override=True`` is passed;
* looking up an unknown name raises and lists the known names;
* entries may be lazy ``"pkg.mod:attr"`` strings, resolved on first ``get``;
* entry points of an installed-package group are scanned on the first lookup,
  never at import; a broken entry point fails loudly with its name without
  breaking the other entries.
"""
from __future__ import annotations

import importlib
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class RegistryError(KeyError):
    """An unknown or duplicate name, or an entry that failed to load."""

    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    def __init__(self, kind: str, entry_point_group: str | None = None):
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._entries: dict[object, object] = {}
        self._scanned = entry_point_group is None

    def register(self, name: object, entry: T | str | None = None, *,
                 override: bool = False) -> Callable[[T], T] | T:
        """Register ``entry`` under ``name``; without ``entry``, act as a decorator."""
        if entry is None:
            def decorate(obj: T) -> T:
                self.register(name, obj, override=override)
                return obj
            return decorate
        if name in self._entries and not override:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def get(self, name: object) -> T:
        self._scan_entry_points()
        try:
            entry = self._entries[name]
        except KeyError:
            known = ", ".join(sorted(str(k) for k in self._entries))
            raise RegistryError(f"unknown {self.kind} {name!r}; known: {known}") from None
        if isinstance(entry, str):
            entry = self._load(name, entry)
            self._entries[name] = entry
        return entry  # type: ignore[return-value]

    def lookup(self, name: object) -> T | None:
        """Like ``get`` but returns None for an unknown name."""
        self._scan_entry_points()
        return self.get(name) if name in self._entries else None

    def __contains__(self, name: object) -> bool:
        self._scan_entry_points()
        return name in self._entries

    def names(self) -> list:
        self._scan_entry_points()
        return sorted(self._entries, key=str)

    def __iter__(self) -> Iterator:
        return iter(self.names())

    def __len__(self) -> int:
        self._scan_entry_points()
        return len(self._entries)

    def _load(self, name: object, spec: str) -> T:
        module_name, _, attr = spec.partition(":")
        try:
            obj = importlib.import_module(module_name)
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except Exception as exc:  # a broken plugin names itself and its cause
            raise RegistryError(
                f"{self.kind} {name!r} failed to load from {spec!r}: "
                f"{type(exc).__name__}: {exc}") from exc
        return obj  # type: ignore[return-value]

    def _scan_entry_points(self) -> None:
        if self._scanned:
            return
        self._scanned = True
        from importlib.metadata import entry_points
        for ep in entry_points(group=self.entry_point_group):
            if ep.name not in self._entries:
                self._entries[ep.name] = ep.value
