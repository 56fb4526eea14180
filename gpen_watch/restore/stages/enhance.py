"""The GPU-side stage: aligned face crops in, restored crops (and parse masks) out, in batches."""

from __future__ import annotations

import contextlib
import logging
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gpen_watch.catalog.face_frames import GPEN_FRAME, FaceFrame
from gpen_watch.config import ParsePrecision
from gpen_watch.restore.nets.fold import as_channels_last, drop_image_head, prepare_conv_net
from gpen_watch.restore.runtime.batching import after_out_of_memory
from gpen_watch.restore.runtime.device import Placement, free_cached_memory, is_out_of_memory
from gpen_watch.restore.runtime.face_model import FaceModel
from gpen_watch.restore.runtime.formats import NativeFormats, native_formats, parse_format

log = logging.getLogger(__name__)

# ParseNet's 19 classes, in its label order (CelebAMask-HQ as PSFR-GAN numbers them).
PARSE_CLASSES = (
    "background", "skin", "nose", "eye_g", "l_eye", "r_eye", "l_brow", "r_brow", "l_ear", "r_ear",
    "mouth", "u_lip", "l_lip", "hair", "hat", "ear_r", "neck_l", "neck", "cloth",
)  # fmt: skip
# GPEN's classes left out of the paste mask (each family's are in its frame): background, hat and
# cloth, as upstream GPEN does. Hair, the necklace and the neck stay in: the generator was trained
# on whole aligned crops, and a mask that stopped at the jaw would paste a restored chin onto an
# unrestored neck with a seam between them.
NOT_FACE = GPEN_FRAME.mask.not_face
_PARSE_SIZE = 512
# ParseNet is fully convolutional: at half its trained side it runs a quarter of the arithmetic
# and gives a (N, 19, 256, 256) map (restore.parse_small_below).
_SMALL_PARSE_SIZE = 256


class OutOfMemory(RuntimeError):
    """Even one face did not fit on the device."""


class FaceEnhancer:
    """Runs a face model (``face_model.FaceModel``) and optionally ParseNet on (F, S, S, 3) BGR
    uint8 crops, scaling the pixels as the model's family was trained (``frame``) and passing each
    face's fidelity weight to a family that takes one (``fidelity``: its default; None: none)."""

    def __init__(
        self,
        model: FaceModel,
        place: Placement,
        face_batch: int,
        parser: nn.Module | None = None,
        strength: float = 1.0,
        parser_ready: bool = False,
        parse_precision: ParsePrecision = "auto",
        parse_small_below: int = 0,
        frame: FaceFrame = GPEN_FRAME,
        fidelity: float | None = None,
    ) -> None:
        self.size = model.size
        self.frame = frame
        self.fidelity = fidelity
        # restore.strength: the share of the restored face in the crop that is pasted back.
        self.strength = strength
        self.place = place
        self.face_batch = max(1, face_batch)
        self.model = model
        # ``parser_ready``: one parser prepared once (``prepare_parser``, with the same
        # ``parse_precision``) and shared by the enhancers of several models.
        self.parse_precision, note = resolve_parse_precision(parse_precision, place)
        if note:  # a restorer resolves it once and passes the result: this warns other callers
            log.warning("%s", note)
        if parser is not None and not parser_ready:
            parser = prepare_parser(parser, place, self.parse_precision)
        self.parser = parser
        self.parse_small_below = parse_small_below
        self._not_face = torch.zeros(19, dtype=torch.bool, device=place.device)
        self._not_face[list(frame.mask.not_face)] = True
        # Pixels in [0, 1] -> the network's scale: (p - mean) / std per RGB channel, and back.
        self._symmetric = frame.mean == (0.5, 0.5, 0.5) and frame.std == (0.5, 0.5, 0.5)
        self._mean = torch.tensor(frame.mean, device=place.device).view(1, 3, 1, 1)
        self._std = torch.tensor(frame.std, device=place.device).view(1, 3, 1, 1)
        # Seconds inside ParseNet's passes so far, for the benchmark's parse / generate split; kept
        # out of FileResult.timings, whose stages add up to a photo's time where they are shown.
        self.parse_s = 0.0

    def enhance(
        self,
        crops: np.ndarray,
        strengths: np.ndarray | None = None,
        paste_px: np.ndarray | None = None,
        fidelities: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(F,S,S,3) uint8 BGR -> restored (F,S,S,3) uint8 BGR, parse masks (F,S,S) float32 or None.

        ``strengths``: restore.strength of each crop (F,), for a batch of photos from inboxes with
        different strengths; None: this enhancer's own for every crop. ``paste_px``: (F,) the side
        each crop has once pasted back into its photo, for restore.parse_small_below; without it
        every face is parsed at 512 px. ``fidelities``: restore.fidelity of each crop (F,) for a
        model that takes one; None: the family's default for every crop."""
        if self.fidelity is not None and fidelities is None:
            fidelities = np.full(len(crops), self.fidelity, dtype=np.float32)
        elif self.fidelity is None:
            fidelities = None  # the model takes no fidelity weight
        faces: list[np.ndarray] = []
        masks: list[np.ndarray] = []
        start = 0
        while start < len(crops):
            chunk = crops[start : start + self.face_batch]
            amounts = strengths[start : start + len(chunk)] if strengths is not None else None
            small = self._parse_small(paste_px, start, len(chunk))
            weights = fidelities[start : start + len(chunk)] if fidelities is not None else None
            try:
                if any(small) or weights is not None:
                    out, mask = self._run(chunk, amounts, small, weights)
                else:
                    out, mask = self._run(chunk) if amounts is None else self._run(chunk, amounts)
            except (torch.cuda.OutOfMemoryError, RuntimeError) as exc:
                if not is_out_of_memory(exc):
                    raise
                smaller = after_out_of_memory(self.face_batch)
                if smaller is None:
                    raise OutOfMemory(str(exc)) from exc
                self.face_batch = smaller
                log.warning("out of GPU memory; face batch lowered to %d", self.face_batch)
                free_cached_memory(self.place.device)
                continue
            faces.append(out)
            if mask is not None:
                masks.append(mask)
            start += len(chunk)
        restored = np.concatenate(faces) if faces else crops[:0].copy()
        return restored, (np.concatenate(masks) if masks else None)

    def _to_network(self, rgb: torch.Tensor) -> torch.Tensor:
        """(N, 3, S, S) RGB in 0..255 -> the network's scale, in place."""
        if self._symmetric:  # [-1, 1], the same arithmetic as ever
            return rgb.div_(127.5).sub_(1.0)
        return rgb.div_(255.0).sub_(self._mean).div_(self._std)

    def _clamp(self, y: torch.Tensor) -> torch.Tensor:
        """The network's output limited to what pixels in [0, 1] are on its scale, in place."""
        if self._symmetric:
            return y.clamp_(-1, 1)
        return torch.clamp(y, (0.0 - self._mean) / self._std, (1.0 - self._mean) / self._std, out=y)

    def _to_pixels(self, y: torch.Tensor) -> torch.Tensor:
        """The network's scale -> 0..255 (unrounded), in place."""
        if self._symmetric:
            return y.add_(1).mul_(127.5)
        return y.mul_(self._std).add_(self._mean).mul_(255.0)

    def _parse_small(self, paste_px: np.ndarray | None, start: int, n: int) -> list[bool]:
        """For each face of a chunk: is its mask made at 256 px?"""
        if paste_px is None or self.parse_small_below <= 0:
            return [False] * n
        return [bool(px < self.parse_small_below) for px in paste_px[start : start + n]]

    def _parse_context(self) -> contextlib.AbstractContextManager[object]:
        # "auto" keeps the parser inside the generator's autocast, as before the setting existed.
        return self.model.autocast() if self.parse_precision == "auto" else contextlib.nullcontext()

    def _run(
        self,
        chunk: np.ndarray,
        strengths: np.ndarray | None = None,
        small: list[bool] | None = None,
        fidelities: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """One chunk through the face model (and ParseNet; ``small[i]``: face i is parsed at 256 px;
        ``fidelities``: each face's weight, for a model that takes one)."""
        dev = self.place.device
        small = small or [False] * len(chunk)
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(chunk)).to(dev, non_blocking=True)
            # BGR uint8 (N,S,S,3) -> RGB float (N,3,S,S) on the family's scale.
            x = self._to_network(x.flip(-1).permute(0, 3, 1, 2).float())
            if fidelities is None:
                y = self.model(x)  # fp32 out, whatever the autocast inside
            else:
                y = self.model(x, fidelity=torch.from_numpy(fidelities.astype(np.float32)).to(dev))
            if self.parser is not None:
                # On a CPU ParseNet's activations at 512 px take ~0.5 GB a face and a batch costs as
                # much per face as one face at a time, so it parses one face per pass there
                # (docs/benchmarks.md, "Memory"). On a GPU the batch pays, in device memory.
                step = 1 if dev.type == "cpu" else len(y)
                mask = torch.empty(len(y), self.size, self.size, device=dev)
                timer = _PassTimer(dev)
                with self._parse_context():
                    for flag in (False, True):
                        idx = [i for i, s in enumerate(small) if s is flag]
                        for j in range(0, len(idx), step):
                            mask[idx[j : j + step]] = self._parse(y[idx[j : j + step]], flag)
                timer.stop()
            else:
                mask, timer = None, None
            y = self._clamp(y)
            if strengths is not None and bool((strengths < 1.0).any()):
                # Blended here, in crop space, so paste-back costs what it did; the mask above
                # comes from the full-strength face, where the parser sees the clearest face.
                weight = torch.from_numpy(strengths.astype(np.float32)).to(dev).view(-1, 1, 1, 1)
                y = torch.lerp(x, y, weight)
            elif strengths is None and self.strength < 1.0:
                y = torch.lerp(x, y, self.strength)
            y = self._to_pixels(y).round_()
            out = y.to(torch.uint8).permute(0, 2, 3, 1).flip(-1).contiguous().cpu().numpy()
            if timer is not None:
                self.parse_s += timer.seconds()  # after .cpu(): the device is done with the passes
            return out, (mask.float().cpu().numpy() if mask is not None else None)

    def _parse(self, y: torch.Tensor, small: bool = False) -> torch.Tensor:
        """Face-region mask (N,S,S) in {0,1} from ParseNet run on the restored faces (at 256 px
        when ``small``)."""
        # ParseNet takes RGB in [-1, 1], whatever the face model's scale.
        if self._symmetric:
            inp = y.float().clamp(-1, 1)
        else:
            inp = self._to_pixels(self._clamp(y.float().clone())).div_(127.5).sub_(1.0)
        side = _SMALL_PARSE_SIZE if small else _PARSE_SIZE
        if inp.shape[-1] != side:
            # antialias when shrinking: a plain bilinear shrink of 512 -> 256 skips every other pixel.
            inp = F.interpolate(inp, size=(side, side), mode="bilinear", align_corners=False, antialias=small)
        if self.parse_precision == "bf16":
            inp = inp.to(torch.bfloat16)
        assert self.parser is not None, "parse mask asked for without a parser"
        logits = self.parser(as_channels_last(inp))[0]  # (N, 19, side, side)
        labels = logits.argmax(dim=1)
        face = (~self._not_face[labels]).float().unsqueeze(1)
        if face.shape[-1] != self.size:
            face = F.interpolate(face, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return face[:, 0]


class _PassTimer:
    """Wall seconds of work queued on ``device``: CUDA events there (read once the device has
    synchronised, so timing costs no extra wait), the clock elsewhere."""

    def __init__(self, device: torch.device) -> None:
        self._events: tuple[torch.cuda.Event, torch.cuda.Event] | None = None
        if device.type == "cuda":
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))  # type: ignore[no-untyped-call]
            start.record()
            self._events = (start, end)
        self._t0 = time.perf_counter()
        self._t1 = self._t0

    def stop(self) -> None:
        if self._events is not None:
            self._events[1].record()
        self._t1 = time.perf_counter()

    def seconds(self) -> float:
        if self._events is not None:
            return float(self._events[0].elapsed_time(self._events[1])) / 1000.0
        return self._t1 - self._t0


def resolve_parse_precision(
    wanted: ParsePrecision, place: Placement, native: NativeFormats | None = None
) -> tuple[ParsePrecision, str]:
    """restore.parse_precision as ParseNet runs it on ``place``, and the sentence saying why that is
    not what was asked ("" when it is): int8 has kernels on CPUs only, and a format the device
    would emulate runs as fp32 (``formats.parse_format``). ``native``: what the device computes
    natively, read from it when None (tests pass another CPU's)."""
    if wanted in ("auto", "fp32"):
        return wanted, ""
    int8_engine = False
    if wanted == "int8" and place.device.type == "cpu":
        from gpen_watch.restore.nets.quant import int8_backend

        int8_engine = int8_backend() is not None
    return parse_format(wanted, place.device, native or native_formats(place.device), int8_engine)


def prepare_parser(parser: nn.Module, place: Placement, precision: ParsePrecision) -> nn.Module:
    """ParseNet ready for inference on ``place`` (``fold.prepare_conv_net``), then in int8 or
    bf16 when ``precision`` (resolved by ``resolve_parse_precision``) asks for it."""
    parser = prepare_conv_net(parser, place.device, rewrite=precision != "int8")
    drop_image_head(parser)  # _parse reads only the class map
    if precision == "int8":
        from gpen_watch.restore.nets.quant import quantize_parser

        return quantize_parser(parser)
    if precision == "bf16":
        return parser.to(torch.bfloat16)
    return parser
