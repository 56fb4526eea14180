"""Loading what a restorer runs: a model set for a profile's generator-side settings, and the
detector for its detection settings. The networks that do not differ between profiles (each
detector network, the parser) are loaded once and shared."""

from __future__ import annotations

from torch import nn

from gpen_watch.config import RestoreConfig
from gpen_watch.restore.engines.modelsets import ModelKey, ModelSet, weights_mb
from gpen_watch.restore.nets.fold import prepare_detector
from gpen_watch.restore.nets.retinaface import RetinaFace
from gpen_watch.restore.runtime import memory
from gpen_watch.restore.runtime.batching import auto_face_batch
from gpen_watch.restore.runtime.device import Placement
from gpen_watch.restore.runtime.face_model import load_face_model
from gpen_watch.restore.stages import upscale
from gpen_watch.restore.stages.detect import Detector, FaceDetector
from gpen_watch.restore.stages.enhance import FaceEnhancer, prepare_parser, resolve_parse_precision


class Loader:
    """Loads from the restorer's own folders (restore.model_dir) onto its device."""

    def __init__(
        self, cfg: RestoreConfig, place: Placement, download: bool, detector: Detector | None = None
    ) -> None:
        self.cfg = cfg
        self.place = place
        self.download = download
        # A stand-in detector (tests) serves every profile.
        self.fixed_detector = detector
        self._detector_nets: dict[str, RetinaFace] = {}
        self._detectors: dict[tuple[str, float, int, int], Detector] = {}
        self._parser: nn.Module | None = None  # loaded with the first set that uses it

    def model_set(self, key: ModelKey) -> ModelSet:
        from gpen_watch.restore.engines import verify

        dev, cfg, place = self.place.device, self.cfg, self.place
        face = load_face_model(key.model, cfg.model_dir, place, self.download)
        size = face.size
        parser = None
        if key.use_parse:
            if self._parser is None:
                raw = verify.load_parser(cfg.model_dir, device=str(dev), download=self.download)
                self._parser = prepare_parser(raw, place, resolve_parse_precision(cfg.parse_precision, place))
            parser = self._parser
        batch = cfg.face_batch or auto_face_batch(size, place, parse=parser is not None)
        mb = weights_mb(face.network)
        # restore.parse_precision and .parse_small_below are the worker's (global only): the
        # parser is one network shared by every set.
        enhancer = FaceEnhancer(
            face,
            place,
            batch,
            parser,
            strength=1.0,
            parser_ready=True,
            parse_precision=cfg.parse_precision,
            parse_small_below=cfg.parse_small_below,
        )
        upscaler = None
        if key.upscale > 1:
            net = verify.load_upscaler(key.upscale, key.upscale_model, cfg.model_dir, str(dev), self.download)
            mb += weights_mb(net)
            upscaler = upscale.Upscaler(net, place)
        on_cpu = dev.type == "cpu"
        # On a GPU only the host's share, the same for every set (the face batch sizes the device's).
        working = memory.activation_mb(size, batch, on_cpu, parser is not None)
        if upscaler is not None and on_cpu:
            working += upscaler.working_mb
        return ModelSet(key, size, enhancer, upscaler, mb, working)

    def detector(self, cfg: RestoreConfig) -> Detector:
        """The detector for a photo with settings ``cfg``, made on first use (device loop only)."""
        found = self.made_detector(cfg)
        if found is not None:
            return found
        net = self._detector_nets.get(cfg.detector)
        if net is None:
            from gpen_watch.restore.engines import verify

            dev = str(self.place.device)
            net = prepare_detector(
                verify.load_detector(cfg.detector, self.cfg.model_dir, device=dev, download=self.download),
                self.place.device,
            )
            self._detector_nets[cfg.detector] = net
        found = FaceDetector(
            net,
            self.place.device,
            threshold=cfg.detect_threshold,
            max_side=cfg.detect_max_side,
            shrink_above=cfg.detect_shrink_above,
        )
        self._detectors[_detector_key(cfg)] = found
        return found

    def made_detector(self, cfg: RestoreConfig) -> Detector | None:
        """The detector for ``cfg`` if it was made already (safe from the decode threads)."""
        if self.fixed_detector is not None:
            return self.fixed_detector
        return self._detectors.get(_detector_key(cfg))


def _detector_key(cfg: RestoreConfig) -> tuple[str, float, int, int]:
    """The settings that make one detector differ from another."""
    return (cfg.detector, cfg.detect_threshold, cfg.detect_max_side, cfg.detect_shrink_above)
