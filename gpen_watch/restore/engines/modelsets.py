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

from torch import nn

from gpen_watch.catalog.face_frames import FaceFrame

# ModelKey lives with the engine's torch-free contract (the service's status names the sets too).
from gpen_watch.restore.api import ModelKey as ModelKey
from gpen_watch.restore.runtime import memory
from gpen_watch.restore.stages.enhance import FaceEnhancer
from gpen_watch.restore.stages.upscale import Upscaler

log = logging.getLogger(__name__)


@dataclass
class ModelSet:
    key: ModelKey
    size: int  # the generator's crop size
    enhancer: FaceEnhancer
    upscaler: Upscaler | None
    mb: float  # what its own weights take (the shared detector and parser are not counted)
    # Host memory its passes (generator, parser, upscaler) take at their peak (memory.activation_mb).
    working_mb: float = 0.0

    @property
    def frame(self) -> FaceFrame:
        """Its family's template and paste mask, which the faces it restores are aligned and pasted with."""
        return self.enhancer.frame


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
        # Working memory the budget already sets aside apart from the sets (the restorer's own
        # set's passes): only a set whose passes take more costs the difference (``total_mb``).
        self.reserved_mb = 0.0
        # How often each set was loaded, over this restorer's life (status, tests).
        self.loads: Counter[ModelKey] = Counter()
        # Told the sets loaded (least recently used first) after each load and unload: the worker
        # passes them on to the service's status (dispatch.protocol.ModelSets).
        self.on_change: Callable[[list[ModelKey]], None] | None = None

    def __contains__(self, key: ModelKey) -> bool:
        return key in self._sets

    @property
    def loaded(self) -> list[ModelKey]:
        """Least recently used first."""
        return list(self._sets)

    @property
    def total_mb(self) -> float:
        """What the sets take: their weights, and what the hungriest one's passes take over
        ``reserved_mb`` (a 1024 px generator beside a 512 one on a CPU). The passes run one after
        another on the same heap, so only the largest counts."""
        working = max((s.working_mb for s in self._sets.values()), default=0.0)
        return sum(s.mb for s in self._sets.values()) + max(0.0, working - self.reserved_mb)

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
            "model set %s loaded in %.1f s (%.0f MB, its passes up to %.0f MB; %d set(s) loaded)",
            key.label,
            time.perf_counter() - t0,
            new.mb,
            new.working_mb,
            len(self._sets),
        )
        if self.on_change is not None:
            self.on_change(self.loaded)
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
            together = self.total_mb
            gone = self._sets.pop(idle[0])
            log.info(
                "unloaded model set %s (least recently used) to make room for %s: together they "
                "would take %.0f MB, over the %.0f MB restore.memory_mb leaves for models; it is "
                "loaded again when a photo needs it",
                gone.key.label,
                keep.label,
                together,
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
