"""The GPU-side stage: aligned face crops in, restored crops (and parse masks) out, in batches."""

from __future__ import annotations

import logging

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gpen_watch.restore.device import Placement, free_cached_memory, is_out_of_memory
from gpen_watch.restore.fold import as_channels_last, prepare_conv_net
from gpen_watch.restore.gpen_model import GPEN, prepare_for_inference

log = logging.getLogger(__name__)

# ParseNet's 19 classes, in its label order (CelebAMask-HQ as PSFR-GAN numbers them).
PARSE_CLASSES = (
    "background", "skin", "nose", "eye_g", "l_eye", "r_eye", "l_brow", "r_brow", "l_ear", "r_ear",
    "mouth", "u_lip", "l_lip", "hair", "hat", "ear_r", "neck_l", "neck", "cloth",
)  # fmt: skip
# Classes left out of the paste mask: background, hat and cloth, as upstream GPEN does. Hair, the
# necklace and the neck stay in: the generator was trained on whole aligned crops, and a mask that
# stopped at the jaw would paste a restored chin onto an unrestored neck with a seam between them.
NOT_FACE = (0, 14, 18)
_PARSE_SIZE = 512


class OutOfMemory(RuntimeError):
    """Even one face did not fit on the device."""


class FaceEnhancer:
    """Runs GPEN (and optionally ParseNet) on (F, S, S, 3) BGR uint8 crops."""

    def __init__(
        self,
        gpen: GPEN,
        size: int,
        place: Placement,
        face_batch: int,
        parser: nn.Module | None = None,
        strength: float = 1.0,
        parser_ready: bool = False,
    ) -> None:
        self.size = size
        # restore.strength: the share of the restored face in the crop that is pasted back.
        self.strength = strength
        self.place = place
        self.face_batch = max(1, face_batch)
        self.gpen = prepare_for_inference(gpen, place.device, place.precision, place.channels_last)
        # ``parser_ready``: one parser prepared once and shared by the enhancers of several models.
        if parser is not None and not parser_ready:
            parser = prepare_conv_net(parser, place.device)
        self.parser = parser
        self._not_face = torch.zeros(19, dtype=torch.bool, device=place.device)
        self._not_face[list(NOT_FACE)] = True

    def enhance(
        self, crops: np.ndarray, strengths: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(F,S,S,3) uint8 BGR -> restored (F,S,S,3) uint8 BGR, parse masks (F,S,S) float32 or None.

        ``strengths``: restore.strength of each crop (F,), for a batch of photos from inboxes with
        different strengths; None: this enhancer's own for every crop."""
        faces: list[np.ndarray] = []
        masks: list[np.ndarray] = []
        start = 0
        while start < len(crops):
            chunk = crops[start : start + self.face_batch]
            amounts = strengths[start : start + len(chunk)] if strengths is not None else None
            try:
                out, mask = self._run(chunk) if amounts is None else self._run(chunk, amounts)
            except (torch.cuda.OutOfMemoryError, RuntimeError) as exc:
                if not is_out_of_memory(exc):
                    raise
                if self.face_batch == 1:
                    raise OutOfMemory(str(exc)) from exc
                # Keep the smaller batch for the rest of this worker's life: memory rarely comes back.
                self.face_batch = max(1, self.face_batch // 2)
                log.warning("out of GPU memory; face batch lowered to %d", self.face_batch)
                free_cached_memory(self.place.device)
                continue
            faces.append(out)
            if mask is not None:
                masks.append(mask)
            start += len(chunk)
        restored = np.concatenate(faces) if faces else crops[:0].copy()
        return restored, (np.concatenate(masks) if masks else None)

    def _run(
        self, chunk: np.ndarray, strengths: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        dev = self.place.device
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(chunk)).to(dev, non_blocking=True)
            # BGR uint8 (N,S,S,3) -> RGB float (N,3,S,S) in [-1, 1], as GPEN was trained.
            x = x.flip(-1).permute(0, 3, 1, 2).float().div_(127.5).sub_(1.0)
            y = self.gpen(x)  # fp32 out, whatever the autocast inside
            if self.parser is not None:
                # On a CPU ParseNet's activations at 512 px take ~0.5 GB a face and a batch costs as
                # much per face as one face at a time, so it parses one face per pass there
                # (docs/benchmarks.md, "Memory"). On a GPU the batch pays, in device memory.
                step = 1 if dev.type == "cpu" else len(y)
                with self.gpen.autocast():
                    mask = torch.cat([self._parse(y[i : i + step]) for i in range(0, len(y), step)])
            else:
                mask = None
            y = y.clamp_(-1, 1)
            if strengths is not None and bool((strengths < 1.0).any()):
                # Blended here, in crop space, so paste-back costs what it did; the mask above
                # comes from the full-strength face, where the parser sees the clearest face.
                weight = torch.from_numpy(strengths.astype(np.float32)).to(dev).view(-1, 1, 1, 1)
                y = torch.lerp(x, y, weight)
            elif strengths is None and self.strength < 1.0:
                y = torch.lerp(x, y, self.strength)
            y = y.add_(1).mul_(127.5).round_()
            out = y.to(torch.uint8).permute(0, 2, 3, 1).flip(-1).contiguous().cpu().numpy()
            return out, (mask.float().cpu().numpy() if mask is not None else None)

    def _parse(self, y: torch.Tensor) -> torch.Tensor:
        """Face-region mask (N,S,S) in {0,1} from ParseNet run on the restored faces."""
        inp = y.float().clamp(-1, 1)
        if inp.shape[-1] != _PARSE_SIZE:
            inp = F.interpolate(inp, size=(_PARSE_SIZE, _PARSE_SIZE), mode="bilinear", align_corners=False)
        assert self.parser is not None, "parse mask asked for without a parser"
        logits = self.parser(as_channels_last(inp))[0]  # (N, 19, 512, 512)
        labels = logits.argmax(dim=1)
        face = (~self._not_face[labels]).float().unsqueeze(1)
        if face.shape[-1] != self.size:
            face = F.interpolate(face, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return face[:, 0]
