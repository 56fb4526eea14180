"""ONNX Runtime's execution providers as restore.provider names them, and the choice among them.

Plain data, below the config that checks restore.provider against it; nothing here imports
onnxruntime.

One table rather than one module each: a provider here is only a name, the package that brings it
and its options; ONNX Runtime does the rest. Only ``cpu`` and ``openvino`` (on a CPU) have been run
in this project; the others are spelled from ONNX Runtime's documentation and wait for a machine
that has them.

A provider asked for but not present never raises: the session runs on the CPU provider, and the
note says so in one sentence that names the package to install.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Provider:
    """One execution provider: restore.provider's word for it, ONNX Runtime's name, where it comes from."""

    name: str
    ort_name: str
    # What to pip install for it. Every onnxruntime-* wheel replaces the plain onnxruntime one (they
    # share the import name), hence "in place of" in the fallback note.
    package: str
    options: Mapping[str, str] = field(default_factory=dict)
    run_here: bool = False  # run in this project's tests and benchmarks, not only written down
    # Runs fp16 graphs on a GPU's fp16 units: restore.precision auto (and fp16, bf16) then opens
    # the fp16 copy of each export but the detector's (``onnx_half``); fp32 everywhere else.
    half: bool = False


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("cpu", "CPUExecutionProvider", "onnxruntime", run_here=True),
        # device_type CPU: OpenVINO's CPU plugin; "GPU" would be an Intel GPU, "NPU" an Intel NPU.
        Provider(
            "openvino", "OpenVINOExecutionProvider", "onnxruntime-openvino", {"device_type": "CPU"}, True
        ),
        Provider("cuda", "CUDAExecutionProvider", "onnxruntime-gpu", half=True),
        # TensorRT's provider comes in onnxruntime-gpu but also needs NVIDIA's TensorRT libraries.
        Provider("tensorrt", "TensorrtExecutionProvider", "onnxruntime-gpu", half=True),
        Provider("directml", "DmlExecutionProvider", "onnxruntime-directml", half=True),
        # CoreML is in the plain onnxruntime wheel for macOS. Not half: Core ML chooses the
        # precision of an fp32 graph itself (fp16 on the GPU and the Neural Engine).
        Provider("coreml", "CoreMLExecutionProvider", "onnxruntime"),
        Provider("rocm", "ROCMExecutionProvider", "onnxruntime-rocm", half=True),
    )
}

CPU = PROVIDERS["cpu"]


@dataclass(frozen=True)
class ProviderChoice:
    """What a session is created with: ONNX Runtime's providers in order, with their options, and
    the note to show when the one asked for is not what runs (None when it is)."""

    asked: Provider
    providers: list[tuple[str, dict[str, str]]]
    note: str | None

    @property
    def runs(self) -> str:
        """restore.provider's word for the provider that runs first."""
        first = self.providers[0][0]
        return next(p.name for p in PROVIDERS.values() if p.ort_name == first)


def provider(name: str) -> Provider:
    """restore.provider = ``name``; ValueError listing the known names for any other word."""
    try:
        return PROVIDERS[name.strip().lower()]
    except KeyError:
        raise ValueError(
            f"unknown ONNX Runtime provider {name!r}; expected one of {', '.join(PROVIDERS)}"
        ) from None


def fallback_note(asked: Provider) -> str:
    """The one sentence said when ``asked`` is not installed and the CPU provider runs instead."""
    return (
        f"restore.provider = {asked.name}: ONNX Runtime's {asked.ort_name} is not installed, so the "
        f"CPU provider runs instead (pip install {asked.package} in place of onnxruntime to have it)."
    )


def choose(name: str, available: Sequence[str]) -> ProviderChoice:
    """The providers to open a session with for restore.provider = ``name``, given ONNX Runtime's
    ``get_available_providers()``. The CPU provider always comes last: ONNX Runtime hands it every
    node the first provider cannot run."""
    asked = provider(name)
    cpu = (CPU.ort_name, dict(CPU.options))
    if asked is CPU:
        return ProviderChoice(asked, [cpu], None)
    if asked.ort_name not in available:
        return ProviderChoice(asked, [cpu], fallback_note(asked))
    return ProviderChoice(asked, [(asked.ort_name, dict(asked.options)), cpu], None)


def failed_note(asked: Provider, reason: str) -> str:
    """The sentence said when ``asked`` is installed but would not start (its libraries, its device)."""
    return (
        f"restore.provider = {asked.name}: ONNX Runtime's {asked.ort_name} is installed but did not "
        f"start ({reason}), so the CPU provider runs instead."
    )


def run_failed_note(asked: Provider, network: str, reason: str) -> str:
    """The sentence said when ``asked`` started but failed running ``network`` (a graph its
    compiler will not take, a device that went away): that network moves to the CPU provider."""
    return (
        f"restore.provider = {asked.name}: ONNX Runtime's {asked.ort_name} failed running {network} "
        f"({reason}), so the CPU provider runs it from now on."
    )


def runs_half(choice: ProviderChoice, precision: str) -> bool:
    """Whether a session of ``choice`` opens fp16 copies for restore.precision = ``precision``:
    on a provider that runs them (``Provider.half``) and is there to run (no fallback note), for
    auto, fp16 and bf16 (the nearest these providers run throughout); fp32 asks for fp32."""
    return choice.asked.half and choice.note is None and precision != "fp32"
