"""The generator-side models a restorer holds: one set per distinct profile that needs one.

Inboxes may name their own generator (restore.model), mask (restore.use_parse) and background
upscaler (restore.upscale, restore.upscale_model). Each distinct choice is a *model set*: loaded the
first time a photo needs it, then kept warm. The sets share what does not differ (the detector
networks, the parser), so a second set costs its generator (and upscaler) only.

What the sets may take is bounded by restore.memory_mb: when loading one would take them past it,
the least recently used set that no photo in hand needs is unloaded first (and loaded again when a
photo asks for it). The set a photo needs is always loaded, even over the budget: a small budget
slows, never stalls.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore.registry import GPEN_NAMES
from gpen_watch.restore import memory
from gpen_watch.restore.enhance import FaceEnhancer
from gpen_watch.restore.upscale import Upscaler

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelKey:
    """The restore settings that decide which generator-side models a photo needs."""

    model: str
    use_parse: bool
    upscale: int
    upscale_model: str

    @classmethod
    def of(cls, cfg: RestoreConfig) -> ModelKey:
        return cls(cfg.model, cfg.use_parse, cfg.upscale, cfg.upscale_model if cfg.upscale > 1 else "")

    @property
    def label(self) -> str:
        text = self.model if self.model in GPEN_NAMES else Path(self.model).name
        if not self.use_parse:
            text += ", feathered mask"
        if self.upscale > 1:
            text += f", upscaled x{self.upscale}"
        return text


@dataclass
class ModelSet:
    key: ModelKey
    size: int  # the generator's crop size
    enhancer: FaceEnhancer
    upscaler: Upscaler | None
    mb: float  # what its own weights take (the shared detector and parser are not counted)


def weights_mb(*modules: nn.Module | None) -> float:
    """Parameters and buffers of ``modules``, in MB: what unloading them gives back."""
    total = 0
    for module in modules:
        if module is None:
            continue
        total += sum(t.numel() * t.element_size() for t in module.parameters())
        total += sum(t.numel() * t.element_size() for t in module.buffers())
    return total / (1 << 20)


class ModelSets:
    """Loaded model sets, least recently used first, within ``cap_mb`` for all of them together."""

    def __init__(self, load: Callable[[ModelKey], ModelSet], release: Callable[[], None]) -> None:
        self._load = load
        self._release = release  # hands freed memory back (device cache, allocator)
        self._sets: OrderedDict[ModelKey, ModelSet] = OrderedDict()
        # What the sets together may take (MB); set once the first one is in (see Restorer).
        self.cap_mb = float("inf")
        # How often each set was loaded, over this restorer's life (status, tests).
        self.loads: Counter[ModelKey] = Counter()

    def __contains__(self, key: ModelKey) -> bool:
        return key in self._sets

    @property
    def loaded(self) -> list[ModelKey]:
        """Least recently used first."""
        return list(self._sets)

    @property
    def total_mb(self) -> float:
        return sum(s.mb for s in self._sets.values())

    def peek(self, key: ModelKey) -> ModelSet | None:
        return self._sets.get(key)

    def get(self, key: ModelKey, busy: Collection[ModelKey] = ()) -> ModelSet:
        """The set for ``key``, loaded if it is not; ``busy``: sets photos in hand still need."""
        found = self._sets.get(key)
        if found is not None:
            self._sets.move_to_end(key)
            return found
        t0 = time.perf_counter()
        new = self._load(key)
        self.loads[key] += 1
        self._sets[key] = new
        self._make_room(key, busy)
        log.info(
            "model set %s loaded in %.1f s (%.0f MB; %d set(s) loaded)",
            key.label,
            time.perf_counter() - t0,
            new.mb,
            len(self._sets),
        )
        return new

    def _make_room(self, keep: ModelKey, busy: Collection[ModelKey]) -> None:
        while self.total_mb > self.cap_mb:
            idle = [k for k in self._sets if k != keep and k not in busy]
            if not idle:
                log.warning(
                    "model sets take %.0f MB, over the %.0f MB restore.memory_mb leaves them, but "
                    "photos in hand need every one: kept until they are done",
                    self.total_mb,
                    self.cap_mb,
                )
                return
            gone = self._sets.pop(idle[0])
            log.info(
                "unloaded model set %s (least recently used) to make room for %s: together they "
                "would take %.0f MB, over the %.0f MB restore.memory_mb leaves for models; it is "
                "loaded again when a photo needs it",
                gone.key.label,
                keep.label,
                self.total_mb + gone.mb,
                self.cap_mb,
            )
            del gone
            gc.collect()
            self._release()


def release_memory(free_device: Callable[[], None]) -> Callable[[], None]:
    """What unloading a set calls: the device's cached blocks, then the host allocator's."""

    def release() -> None:
        free_device()
        memory.give_back_free_memory()

    return release
