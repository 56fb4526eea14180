"""A stand-in for gpen_watch.restore.engines.restorer.Restorer that needs no torch and no weights.

Workers load it through the factory hook ("fake_restorer:FakeRestorer"), so the pool and the
service can be tested for crashes, hangs and out-of-memory in a fraction of a second per image.
What it does to an image depends on the file name:

    crash     SIGKILLs its own process (every time)
    crash1    SIGKILLs its own process the first time only (a marker file beside it remembers)
    halfwrite1  the first time, writes half the output to dst and SIGKILLs its own process; after
              that it writes dst without overwriting (as the real engine does)
    hang      sleeps forever
    oom       always reports out of memory
    oom1      reports out of memory unless scale <= 0.5
    raise     raises instead of returning a result
    slow      sleeps FAKE_SLOW seconds (default 1) first, once it has created a file of the
              photo's name in the folder FAKE_SLOW_STARTED names (if set): it is on the photo;
              meanwhile its progress says "restoring faces 0 of 1"
    bad       returns a failed result ("not an image")
    bugged    returns the failed result of a decoder's bug (ErrorKind.BUG), as restore.stages.decode_stage does
    noface    copies the file to dst and reports no face (a landscape)
    flagged   as any other, its one face's identity distance 0.5: it may not look like the same person
    personN   its one face described as person N's (N = 0 to 127: one-hot descriptors, 1.0 apart), for
              grouping by person; without it every face is the same person
    sharp     its one face left as it was: already sharp (detail 0.33), nothing restored
    fixable   fails ("a part is missing") while the file FAKE_BROKEN_WHILE names exists, as a
              missing model or program would; restored once it is gone
    anything else: copies the file to dst and reports one face.

FAKE_LOAD in the environment changes start-up: "model_error" raises ModelError (with
"model_error_while:PATH" only while PATH exists), "cuda_error"
raises a CUDA-like RuntimeError, "bug" raises AttributeError, "sleep:S" sleeps S seconds (and first
creates the file FAKE_LOAD_STARTED names, if set, to say it is loading). FAKE_LOG_TORCH=1 makes each result
carry a note saying whether torch is imported in the worker. FAKE_READ_AHEAD=N is the number of
photos it asks the pool to hand it at once. FAKE_DEVICE names the device a slot's "auto" resolves
to (default cpu). FAKE_ENGINE and FAKE_ENGINE_NOTE are the engine_label and engine_note it reports
(default ""). Each result's notes say the restore.strength it was given ("strength=0.8").

A photo that ends well and whose job names a views folder gets a views set written there with the
engine's helper (base.fsutil.replace_folder): after.jpg holds the original's bytes, faces.json says
one face (none for "noface"); before.jpg, thumb.jpg and face crops are left out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from gpen_watch.base.errors import ModelError
from gpen_watch.base.fsutil import replace_folder
from gpen_watch.config import RestoreConfig, SettingsUsed
from gpen_watch.imaging.reasons import decoder_bug
from gpen_watch.restore.api import FaceCheck, FileJob, FileResult, ModelSetWatch, PhotoProgress, Stage


class FakeRestorer:
    def __init__(self, cfg: object, device: str, threads: int | None = None) -> None:
        load = os.environ.get("FAKE_LOAD", "")
        if load.startswith("model_error_while:"):
            if Path(load.partition(":")[2]).exists():
                raise ModelError("GPEN-BFR-512: weights not found in /nowhere; run `gpen-watch models fetch`")
        elif load == "model_error":
            raise ModelError("GPEN-BFR-512: weights not found in /nowhere; run `gpen-watch models fetch`")
        if load == "bug":
            raise AttributeError("'GPEN' object has no attribute 'size'")
        if load == "cuda_error":
            raise RuntimeError("CUDA error: no CUDA-capable device is detected")
        if load.startswith("sleep:"):
            if started := os.environ.get("FAKE_LOAD_STARTED"):
                Path(started).touch()
            time.sleep(float(load.partition(":")[2]))
        # What "auto" resolves to, as the real engine reports it: FAKE_DEVICE stands in for a
        # machine this cannot run on ("Apple GPU (mps)"); here the real one finds the CPU.
        if device == "auto":
            device = os.environ.get("FAKE_DEVICE", "cpu")
        self.device_label = device
        self.cfg = cfg
        self.device = device
        self.threads = threads
        # What a real engine would ask the pool for (0: says nothing, the pool picks).
        self.read_ahead = int(os.environ.get("FAKE_READ_AHEAD", "0"))
        # What the real engine says it loaded, for the start-up log and status.
        self.loaded = f"fake model, fake detector, on {device}"
        # What runs its networks and why not what was asked (restore.api.Engine): FAKE_ENGINE
        # and FAKE_ENGINE_NOTE stand in for an engine and a provider this machine lacks.
        self.engine_label = os.environ.get("FAKE_ENGINE", "")
        self.engine_note = os.environ.get("FAKE_ENGINE_NOTE", "")
        # It keeps no memory budget, no model sets and no progress counts (restore.api.Engine).
        self.memory_budget_mb = 0
        self.models: ModelSetWatch | None = None
        self.steps = 0
        self.restoring = -1
        # The photo it is on (restore.api.Engine.progress); it holds one at a time.
        self.progress: tuple[PhotoProgress, ...] = ()

    def restore_files(self, jobs: Iterable[FileJob | None]) -> Iterator[FileResult]:
        for job in jobs:
            if job is not None:  # a live source with nothing waiting (never while we hold none)
                self.progress = (PhotoProgress(str(job.src), Stage.DETECTING),)
                result = self._one(job)
                self.progress = ()
                if result.ok and job.views is not None:
                    _write_views(job, result.faces, sharp="sharp" in job.src.name)
                yield result

    def _one(self, job: FileJob) -> FileResult:
        name = job.src.name
        if "crash1" in name:
            marker = Path(str(job.src) + ".crashed")
            if not marker.exists():
                marker.write_text("x")
                os.kill(os.getpid(), signal.SIGKILL)
        elif "crash" in name:
            os.kill(os.getpid(), signal.SIGKILL)
        if "halfwrite1" in name:
            marker = Path(str(job.src) + ".crashed")
            data = job.src.read_bytes()
            with open(job.dst, "xb") as f:  # never overwrite, like the engine's writers
                if not marker.exists():
                    marker.write_text("x")
                    f.write(data[: len(data) // 2])
                    f.flush()
                    # ...and the image writer's own temp, as a kill inside save_image leaves it.
                    (job.dst.parent / f".{job.dst.name}.tmp-0123abcd").write_bytes(data[:10])
                    os.kill(os.getpid(), signal.SIGKILL)
                f.write(data)
            return FileResult(job.src, ok=True, dst=job.dst, faces=1)
        if "hang" in name:
            time.sleep(3600)
        if "oom1" in name and job.scale > 0.5:
            return FileResult(job.src, ok=False, error="CUDA out of memory", out_of_memory=True)
        if "oom" in name and "oom1" not in name:
            return FileResult(job.src, ok=False, error="CUDA out of memory", out_of_memory=True)
        if "raise" in name:
            raise ValueError("restorer blew up")
        if "slow" in name:
            self.progress = (PhotoProgress(str(job.src), Stage.RESTORING, 0, 1),)
            if started := os.environ.get("FAKE_SLOW_STARTED"):
                (Path(started) / name).touch()
            time.sleep(float(os.environ.get("FAKE_SLOW", "1")))
        if "bad" in name:
            return FileResult(job.src, ok=False, error="not an image", error_kind="unsupported")
        if "fixable" in name and (broken := os.environ.get("FAKE_BROKEN_WHILE")) and Path(broken).exists():
            return FileResult(job.src, ok=False, error=f"a part is missing ({broken})", error_kind="failed")
        if "bugged" in name:
            bug = decoder_bug(job.src, TypeError("expected str, bytes or os.PathLike object, not int"))
            return FileResult(job.src, ok=False, error=bug.reason, error_kind=bug.kind)
        job.dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(job.src, job.dst)
        except FileNotFoundError as exc:  # as the engine's decode stage reports an unreadable file
            return FileResult(job.src, ok=False, error=f"cannot read it: {exc.strerror}", error_kind="failed")
        notes = [f"scale={job.scale}", f"threads={self.threads}", f"device={self.device}"]
        # The strength it was given (the photo's inbox profile, else the workers' own).
        notes.append(f"strength={getattr(job.restore or self.cfg, 'strength', None)}")
        if os.environ.get("FAKE_LOG_TORCH"):
            notes.append(f"torch={'torch' in sys.modules}")
        sharp = "sharp" in name
        faces = 0 if "noface" in name or sharp else 1
        # What it restored with, as the real engine says it: the photo's profile, else its own.
        restore = job.restore or self.cfg
        used = (
            SettingsUsed.of(restore, job.format, job.jpeg_quality)
            if isinstance(restore, RestoreConfig)
            else None
        )
        flagged = "flagged" in name
        # Its one face as the engine's checks describe it (docs/identity.md).
        person = re.search(r"person([0-9]{1,3})", name)
        descriptor = bytearray(512)
        if person and int(person[1]) < 128:
            descriptor[4 * int(person[1]) : 4 * int(person[1]) + 4] = struct.pack("<f", 0.5**0.5)
        checks = (
            [FaceCheck(0, True, 0.1, 0.5 if flagged else 0.05, flagged, bytes(descriptor))] if faces else []
        )
        if sharp:
            checks = [FaceCheck(0, False, 0.33, None, False, bytes(descriptor))]
            notes.append("1 face left as it was: already sharp")
        return FileResult(
            job.src,
            ok=True,
            dst=job.dst,
            faces=faces,
            notes=notes,
            timings={"restore": 0.001},
            used=used,
            checks=checks,
        )

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


def _write_views(job: FileJob, faces: int, sharp: bool = False) -> None:
    assert job.views is not None
    shown = [{"index": 0, "box": [0, 0, 1, 1], "score": 0.9, "restored": True, "reason": None}]
    if sharp:
        reason = "left as it was: already sharp (detail 0.33, restore.sharp_above = 0.27)"
        shown = [{**shown[0], "restored": False, "reason": reason}]
        faces = 1
    meta = {"width": 1, "height": 1, "source_width": 1, "source_height": 1, "faces": shown[:faces]}
    replace_folder(job.views, {"after.jpg": job.src.read_bytes(), "faces.json": json.dumps(meta).encode()})
