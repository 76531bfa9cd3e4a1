"""One registry per axis of a run: strategies, engines, losses, feature networks, metrics protocols and
architectures, and the loading of their entries: the suite's own and the installed plugins'.

The scenario's validation, the CLI's choices, the launcher and the report read these registries instead of keeping
lists of their own, and no other module compares a strategy's, loss's or engine's name: every trait lives on its entry
(:mod:`suite.config.entries`). An entry names its implementation as ``"module:attribute"``, imported only when a run
builds it, so that validating a scenario or parsing the command line stays free of torch and MPI. The suite's own
engines, losses and the rest are :mod:`suite.config.own_entries`; a strategy is one package
(:data:`BUILT_IN_STRATEGIES`), a plugin's is found through an entry point (:data:`ENTRY_POINT_GROUPS`;
docs/adding-a-strategy.md). A plugin that is not an entry of its axis, repeats a name or lacks a trait the suite needs
is refused with one line naming it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from typing import Any, Generic, Iterator, TypeVar

from .entries import ArchitectureEntry, EngineEntry, Entry, FeatureEntry, LossEntry, ProtocolEntry, StrategyEntry
from .names import did_you_mean
from .own_entries import OWN_ARCHITECTURES, OWN_ENGINES, OWN_FEATURES, OWN_LOSSES, OWN_PROTOCOLS


class PluginError(ValueError):
    """An installed plugin's entry cannot be used; the message names the plugin and what it lacks."""


E = TypeVar("E", bound=Entry)


ENTRY_POINT_GROUPS = {
    "strategy": "gan_scaling_suite.strategies",
    "engine": "gan_scaling_suite.engines",
    "loss": "gan_scaling_suite.losses",
}
"""The ``importlib.metadata`` entry point group of each axis that plugins may extend; an entry point's value is
the axis's entry (a :class:`StrategyEntry`, :class:`EngineEntry` or :class:`LossEntry`)."""
NO_PLUGINS = "SUITE_NO_PLUGINS"
"""Environment variable: set to 1, the registries load no installed plugin (the suite's own entries only)."""


class Registry(Generic[E]):
    """The entries of one axis, in registration order: the suite's own, then the installed plugins' (loaded on
    first read)."""

    def __init__(
        self,
        axis: str,
        kind: type[E] = Entry,  # type: ignore[assignment]
        built_in: tuple[str, ...] = (),
        own: tuple[E, ...] = (),
    ):
        self.axis = axis
        self.kind = kind
        self.built_in = built_in
        """The suite's own packages whose ``entry`` module defines entries of this axis (``ENTRIES``), loaded on first
        read before the plugins, in this order."""
        self._own: dict[str, E] = {}
        self._built_in_loaded = not built_in
        self._plugins_loaded = axis not in ENTRY_POINT_GROUPS
        self.plugins: dict[str, str] = {}
        """Name -> the distribution that brought it, for the entries that came from plugins."""
        self.sources: dict[str, str] = {}
        """Name -> the module that defines it, for the entries of the suite's own packages (:attr:`built_in`)."""
        for entry in own:  # the suite's own entries of :mod:`suite.config.own_entries`, first
            self.register(entry)

    @property
    def _entries(self) -> dict[str, E]:
        """Every entry by name; the first read loads the suite's own packages' entries (:meth:`_load_built_in`)."""
        if not self._built_in_loaded:
            self._load_built_in()
        return self._own

    @_entries.setter
    def _entries(self, entries: dict[str, E]) -> None:
        self._own = entries

    def _load_built_in(self) -> None:
        """Register the entries of the suite's own packages (:attr:`built_in`), as plugins' are: each package's
        ``entry`` module, which imports no torch and no training module, holds them as ``ENTRIES``."""
        self._built_in_loaded = True
        for package in self.built_in:
            module = f"{package}.entry"
            for entry in importlib.import_module(module).ENTRIES:
                if not isinstance(entry, self.kind):
                    raise TypeError(f"{module}: expected a {self.kind.__name__}, got {type(entry).__name__}")
                self.register(entry)
                self.sources[entry.name] = module

    def register(self, entry: E) -> E:
        """Add ``entry``; a name can be registered once."""
        if entry.name in self._entries:
            raise ValueError(f"{self.axis} '{entry.name}' is registered twice")
        self._entries[entry.name] = entry
        return entry

    def _load_plugins(self) -> None:
        """Register every installed plugin entry of this axis (once); :class:`PluginError` naming a broken one."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        if os.environ.get(NO_PLUGINS, "") not in ("", "0"):
            return
        group = ENTRY_POINT_GROUPS[self.axis]
        for point in sorted(importlib.metadata.entry_points(group=group), key=lambda p: p.name):
            where = f"plugin {point.name!r} ({group} = {point.value})"
            try:
                entry = point.load()
            except Exception as error:  # a plugin's own import failing: one line naming it
                raise PluginError(f"{where}: cannot be loaded: {type(error).__name__}: {error}") from None
            if not isinstance(entry, self.kind):
                raise PluginError(f"{where}: expected a {self.kind.__name__}, got {type(entry).__name__}")
            if entry.name in self._entries:
                raise PluginError(f"{where}: {self.axis} {entry.name!r} is already registered")
            problems = entry.problems()
            if problems:
                raise PluginError(f"{where}: {self.axis} {entry.name!r} lacks what the suite needs: {'; '.join(problems)}")
            self.register(entry)
            self.plugins[entry.name] = getattr(point.dist, "name", None) or point.value

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order."""
        self._load_plugins()
        return tuple(self._entries)

    def __getitem__(self, name: str) -> E:
        self._load_plugins()
        if name not in self._entries:
            hint = did_you_mean(name, self._entries)
            raise ValueError(f"unknown {self.axis} '{name}'{hint}; choose one of {', '.join(self._entries)}")
        return self._entries[name]

    def __deepcopy__(self, memo: dict[int, Any]) -> Registry[E]:
        # One registry per axis: a copy (as the schema's validators deep-copy what they reference) would keep the
        # names of the time it was made and miss the plugins loaded later.
        return self

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[E]:
        self._load_plugins()
        return iter(list(self._entries.values()))


BUILT_IN_STRATEGIES = (
    "suite.strategies.data_parallel",
    "suite.strategies.label_partitioned",
    "suite.strategies.cellular",
)
"""The suite's own strategies: one package each (:mod:`suite.strategies`), whose ``entry`` module holds its entries,
found by name as a plugin's entry point is (the registry's one reach above it, to modules that import no torch and no
training module: ``tests/test_house.py``)."""

STRATEGIES: Registry[StrategyEntry] = Registry("strategy", StrategyEntry, BUILT_IN_STRATEGIES)
ENGINES: Registry[EngineEntry] = Registry("engine", EngineEntry, own=OWN_ENGINES)
LOSSES: Registry[LossEntry] = Registry("loss", LossEntry, own=OWN_LOSSES)
FEATURES: Registry[FeatureEntry] = Registry("feature network", FeatureEntry, own=OWN_FEATURES)
PROTOCOLS: Registry[ProtocolEntry] = Registry("metrics protocol", ProtocolEntry, own=OWN_PROTOCOLS)
ARCHITECTURES: Registry[ArchitectureEntry] = Registry("architecture", ArchitectureEntry, own=OWN_ARCHITECTURES)


def engines_for(strategy: str) -> tuple[str, ...]:
    """The engines that run ``strategy``: those it names (or all), with the capabilities it requires."""
    entry = STRATEGIES[strategy]
    return tuple(
        e.name for e in ENGINES if (entry.engines is None or e.name in entry.engines) and entry.requires <= e.capabilities
    )


def launcher_engines() -> dict[str, tuple[str, ...]]:
    """Each engine-specific launcher and the engines it can start."""
    starts: dict[str, list[str]] = {}
    for engine in ENGINES:
        for launcher in engine.launchers:
            starts.setdefault(launcher, []).append(engine.name)
    return {launcher: tuple(engines) for launcher, engines in starts.items()}
