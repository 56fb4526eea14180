"""Loading what a restorer runs: a model set for a profile's generator-side settings, and the
detector for its detection settings. The networks that do not differ between profiles (each
detector network, the parser) are loaded once and shared. Each network comes from the restorer's
engine (``networks.Networks``: torch or ONNX Runtime), which the stages cannot tell apart."""

from __future__ import annotations

import dataclasses

from torch import nn

from gpen_watch.catalog.registry import face_family
from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore import needs, store
from gpen_watch.restore.engines.modelsets import ModelKey, ModelSet, weights_mb
from gpen_watch.restore.engines.networks import Networks
from gpen_watch.restore.nets.retinaface import RetinaFace
from gpen_watch.restore.runtime import memory
from gpen_watch.restore.runtime.batching import auto_face_batch
from gpen_watch.restore.runtime.device import Placement
from gpen_watch.restore.stages import upscale
from gpen_watch.restore.stages.detect import Detector, FaceDetector
from gpen_watch.restore.stages.enhance import FaceEnhancer


class Loader:
    """Loads from the restorer's own folders (restore.model_dir) onto its device."""

    def __init__(
        self,
        cfg: RestoreConfig,
        place: Placement,
        download: bool,
        detector: Detector | None = None,
        nets: Networks | None = None,
    ) -> None:
        self.cfg = cfg
        self.place = place
        self.download = download
        if nets is None:
            from gpen_watch.restore.engines.torch_networks import TorchNetworks

            nets = TorchNetworks(cfg, download, None)
        self.nets = nets
        # A stand-in detector (tests) serves every profile.
        self.fixed_detector = detector
        self._detector_nets: dict[str, RetinaFace] = {}
        self._detectors: dict[tuple[str, float, int, int], Detector] = {}
        self._parser: nn.Module | None = None  # loaded with the first set that uses it

    def model_set(self, key: ModelKey) -> ModelSet:
        dev, cfg, place, nets = self.place.device, self.cfg, self.place, self.nets
        if self.download:
            # Files whose terms the user accepted: the loads below do not download those.
            own = dataclasses.replace(
                cfg,
                model=key.model,
                use_parse=key.use_parse,
                upscale=key.upscale,
                upscale_model=key.upscale_model,
            )
            store.fetch_accepted(needs.needed_specs(own), cfg.model_dir, cfg.accepted_terms)
        face = nets.face_model(key.model, place)
        size = face.size
        parser = None
        if key.use_parse:
            if self._parser is None:
                self._parser = nets.parser(place)
            parser = self._parser
        batch = cfg.face_batch or auto_face_batch(size, place, parse=parser is not None)
        mb = weights_mb(face.network)
        # restore.parse_precision and .parse_small_below are the worker's (global only): the
        # parser is one network shared by every set.
        family = face_family(key.model)
        enhancer = FaceEnhancer(
            face,
            place,
            batch,
            parser,
            strength=1.0,
            parser_ready=True,
            parse_precision=nets.parse_precision(place),
            parse_small_below=cfg.parse_small_below,
            frame=family.frame,
            # The worker's restore.fidelity, for a family that takes one; each photo's own is
            # passed with its faces (``device_stages.run_batch``).
            fidelity=cfg.fidelity if family.fidelity else None,
        )
        upscaler = None
        if key.upscale > 1:
            net = nets.upscaler(key.upscale, key.upscale_model, place)
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
            net = self.nets.detector(cfg.detector, self.place)
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
