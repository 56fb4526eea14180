"""The key names of a PyTorch weights file, read without torch: what tells a GFPGAN or CodeFormer
checkpoint given by its path from a GPEN one (``registry.face_family``), in the service's parent
process too, which never imports torch.

Only the file's pickle is read (a few tens of KB: key names and records of where each tensor's
bytes are), never the tensors. The pickle is read by an unpickler that builds nothing but plain
containers: every torch function and storage type it names becomes the same inert placeholder,
and any other global refuses the file, so reading runs no code from it."""

from __future__ import annotations

import collections
import functools
import os
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

# Where a checkpoint keeps its state dict, looked for in this order: GFPGAN's and CodeFormer's
# releases under params_ema (basicsr's EMA weights), basicsr's plain params, rosinality's g_ema,
# Lightning's state_dict; a file without any of them is the state dict itself.
CONTAINER_KEYS = ("params_ema", "params", "g_ema", "state_dict")
# Added by nn.DataParallel at save time; the published detector files carry it.
WRAPPER_PREFIX = "module."

_ZIP_MAGIC = b"PK\x03\x04"
# torch.save's format before the zip one: this number pickled first, then the protocol version
# and the system's description, then the object.
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
# The pickle of a state dict of these networks is tens of KB; a bigger one is not read here.
_MAX_PICKLE_BYTES = 16 << 20


@dataclass(frozen=True)
class StateKeys:
    """A checkpoint's state dict as its keys: the top-level key it sat under (one of
    ``CONTAINER_KEYS``, None for a bare state dict) and its key names in order, any
    ``WRAPPER_PREFIX`` removed."""

    container: str | None
    keys: tuple[str, ...]


class _Placeholder:
    """What every tensor and storage of the file reads as."""


_PLACEHOLDER = _Placeholder()


def _placeholder(*args: object, **kwargs: object) -> _Placeholder:
    return _PLACEHOLDER


class _KeyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch" or module.startswith("torch."):
            return _placeholder
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a plain state dict")

    def persistent_load(self, pid: Any) -> _Placeholder:
        return _PLACEHOLDER


def read_state_keys(path: Path) -> StateKeys | None:
    """``path``'s state dict keys; None where they cannot be read here (no such file, not a
    PyTorch weights file, damaged, or holding anything but plain containers and tensors): its
    loader then says what is wrong with it. Kept per file, size and modification time."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _read_cached(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _read_cached(path: str, size: int, mtime_ns: int) -> StateKeys | None:
    try:
        obj = _load_pickle(Path(path))
    except Exception:  # noqa: BLE001 - whatever stops the read here, the loader says what is wrong
        return None
    return _state_keys(obj)


def _load_pickle(path: Path) -> object:
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(0)
        if head == _ZIP_MAGIC:
            with zipfile.ZipFile(f) as z:
                # torch.save writes "<folder>/data.pkl" beside "<folder>/data/<n>" for the tensors.
                members = [i for i in z.infolist() if i.filename.endswith("/data.pkl")]
                if len(members) != 1 or members[0].file_size > _MAX_PICKLE_BYTES:
                    return None
                with z.open(members[0]) as data:
                    return _KeyUnpickler(data).load()
        return _legacy(f)


def _legacy(f: IO[bytes]) -> object:
    if _KeyUnpickler(f).load() != _LEGACY_MAGIC:
        return None
    _KeyUnpickler(f).load()  # protocol version
    _KeyUnpickler(f).load()  # system description
    return _KeyUnpickler(f).load()


def _state_keys(obj: object) -> StateKeys | None:
    if not isinstance(obj, dict):
        return None
    container = None
    for key in CONTAINER_KEYS:
        if isinstance(obj.get(key), dict):
            container, obj = key, obj[key]
            break
    assert isinstance(obj, dict)
    if not obj or not all(isinstance(k, str) and v is _PLACEHOLDER for k, v in obj.items()):
        return None
    keys = tuple(k.removeprefix(WRAPPER_PREFIX) for k in obj)
    return StateKeys(container, keys)
