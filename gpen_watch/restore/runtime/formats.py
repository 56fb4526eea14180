"""Which number formats a device computes in natively, and what a precision setting becomes where
its format would be emulated.

A reduced format pays only where the hardware computes in it. On a CPU without bf16 instructions
torch emulates bf16: ParseNet in bf16 made a whole run 8.2x slower than fp32 on an AVX2-only AMD
EPYC. int8 without VNNI or AMX gained nothing there (79.1 s against fp32's 77.2 s) and still
changes the mask. So a setting that names such a format runs in fp32, with one sentence saying
why (docs/benchmarks.md, "ParseNet's number format on each kind of CPU").

What a CPU has is read from torch's own reading of it (``torch.cpu.get_capabilities``, through
cpuinfo, on every OS) where this torch has one, else from Linux's /proc/cpuinfo. The flags decide,
not a timed probe: whether a format is emulated is a property of the instructions, while a probe
timed at worker start would read the machine's load as much as its CPU. ``GPEN_WATCH_CPU_FLAGS``
(flag names as /proc/cpuinfo spells them, "avx2 fma") stands in for the CPU's own, so that a test
can run a worker as it runs on another CPU; it is no setting.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from gpen_watch.config import ParsePrecision, Precision, ResolvedPrecision

CPU_FLAGS_ENV = "GPEN_WATCH_CPU_FLAGS"

# Instructions that compute in bf16 (x86: AVX-512 BF16 and AMX; ARM: its BF16 extension, in NEON or
# SVE). Without one, torch's bf16 kernels convert every value to fp32 and back.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16", "sve_bf16", "svebf16"})
# int8 dot products (x86: VNNI in AVX-512 or AVX, and AMX; ARM: the dot-product and int8 matrix
# extensions), which torch's int8 engines are built on.
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "dot", "i8mm"})
# CUDA GPUs compute in bf16 from compute capability 8.0 (Ampere) on.
CUDA_BF16_FROM = (8, 0)

# Why a format is refused, as measured (docs/benchmarks.md).
_BF16_WHY = "emulated bf16 was measured 8x slower than fp32 on such a CPU"
_INT8_WHY = "int8 was measured no faster than fp32 on such a CPU, and it changes the mask"


@dataclass(frozen=True)
class NativeFormats:
    """The reduced number formats one device computes in its own instructions."""

    kind: str  # the torch device's type: "cpu", "cuda", "mps"
    name: str  # as the sentences name it: "this CPU", "cuda:0 (Tesla T4, compute capability 7.5)"
    bf16: bool
    int8: bool
    # What the answer rests on, for the log: the flags found, or why none could be read.
    basis: str
    # False where the CPU's flags could not be read: neither reduced format is taken for native.
    read: bool = True

    @property
    def checked(self) -> bool:
        """Whether the settings are checked against it at all (not on Apple's GPU, unread here)."""
        return self.kind in ("cpu", "cuda")


def parse_cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The flags /proc/cpuinfo lists ("flags" on x86, "Features" on ARM), from its first CPU."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            return frozenset(value.lower().split())
    return frozenset()


def read_cpu_flags() -> tuple[frozenset[str] | None, str]:
    """This CPU's flags and where they came from; None where nothing could be read."""
    forced = os.environ.get(CPU_FLAGS_ENV)
    if forced is not None:
        return frozenset(forced.replace(",", " ").lower().split()), CPU_FLAGS_ENV
    capabilities = getattr(torch.cpu, "get_capabilities", None)  # torch 2.10 and later
    if capabilities is not None:
        try:
            return frozenset(k for k, v in capabilities().items() if v is True), "torch's CPU reading"
        except (RuntimeError, AttributeError):
            pass
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, "no reading of the CPU's instructions"
    flags = parse_cpu_flags(text)
    return (flags, "/proc/cpuinfo") if flags else (None, "no flags in /proc/cpuinfo")


def cpu_formats_of(flags: frozenset[str] | None, source: str, kernels: str = "") -> NativeFormats:
    """What a CPU with ``flags`` computes natively (None: nothing could be read, so neither
    reduced format is taken for native). ``kernels``: torch's own level for its CPU kernels
    ("AVX512"), shown beside the flags."""
    level = f"torch's kernels {kernels}; " if kernels else ""
    if flags is None:
        return NativeFormats("cpu", "this CPU", False, False, f"{level}{source}", read=False)
    found = sorted(flags & (BF16_FLAGS | INT8_FLAGS))
    basis = f"{level}{', '.join(found) or 'no bf16 or int8 instructions'} ({source})"
    return NativeFormats("cpu", "this CPU", bool(flags & BF16_FLAGS), bool(flags & INT8_FLAGS), basis)


def cpu_formats() -> NativeFormats:
    """This CPU's, read when asked (a worker asks at start; torch keeps its own reading)."""
    flags, source = read_cpu_flags()
    return cpu_formats_of(flags, source, torch.backends.cpu.get_cpu_capability())


def native_formats(device: torch.device) -> NativeFormats:
    """What ``device`` computes natively: the CPU's flags, a CUDA GPU's compute capability (or, on
    ROCm, torch's own answer); Apple's GPU is not checked."""
    if device.type == "cpu":
        return cpu_formats()
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        name = f"{device.type}:{index} ({torch.cuda.get_device_name(index)}"
        if torch.version.hip:
            bf16 = bool(torch.cuda.is_bf16_supported())
            return NativeFormats("cuda", f"{name})", bf16, False, "torch's answer on ROCm")
        return NativeFormats(
            "cuda",
            f"{name}, compute capability {major}.{minor})",
            (major, minor) >= CUDA_BF16_FROM,
            False,
            f"compute capability {major}.{minor}",
        )
    return NativeFormats(device.type, str(device), True, False, "not checked")


def generator_format(
    asked: Precision, resolved: ResolvedPrecision, native: NativeFormats
) -> tuple[ResolvedPrecision, str]:
    """restore.precision as it runs, and the sentence saying why that is not what was asked ("" when
    it is). ``resolved``: the setting with "auto" resolved for the device
    (``nets.runner.resolve_precision``). "auto" never lands on an emulated format, silently."""
    if resolved != "bf16" or native.bf16 or not native.checked:
        return resolved, ""
    if asked == "auto":
        return "fp32", ""
    return "fp32", _refused("restore.precision = bf16", _no_bf16(native), "the generator", native)


def parse_format(
    wanted: ParsePrecision, device: torch.device, native: NativeFormats, int8_engine: bool
) -> tuple[ParsePrecision, str]:
    """restore.parse_precision as ParseNet runs it on ``device``, and the sentence saying why that
    is not what was asked ("" when it is). ``int8_engine``: this torch has a quantized engine for
    the CPU. "auto" runs ParseNet inside the generator's autocast, whose format
    ``generator_format`` has checked."""
    if wanted == "int8" and device.type != "cpu":
        return "auto", (
            f"restore.parse_precision = int8 runs on a CPU only, so on {device} ParseNet runs in the "
            "generator's format (restore.precision)."
        )
    if wanted == "int8" and not int8_engine:
        return (
            "fp32",
            "restore.parse_precision = int8: this torch has no int8 engine, so ParseNet runs in fp32.",
        )
    if wanted == "int8" and not native.int8:
        lacks = "this CPU has no int8 dot-product instructions (VNNI or AMX)"
        return "fp32", _refused("restore.parse_precision = int8", lacks, "ParseNet", native, _INT8_WHY)
    if wanted == "bf16" and not native.bf16 and native.checked:
        return "fp32", _refused("restore.parse_precision = bf16", _no_bf16(native), "ParseNet", native)
    return wanted, ""


def formats_label(generator: ResolvedPrecision, parser: ParsePrecision | None) -> str:
    """The formats a worker runs, for its engine label: "fp32", "fp32, ParseNet int8" (``parser``
    resolved; None: no parser; "auto": the generator's)."""
    if parser is None or parser in ("auto", generator):
        return generator
    return f"{generator}, ParseNet {parser}"


def _no_bf16(native: NativeFormats) -> str:
    if native.kind == "cpu":
        return "this CPU has no bf16 instructions (AVX-512 BF16 or AMX)"
    since = " (that needs compute capability 8.0 or later)" if native.basis.startswith("compute") else ""
    return f"{native.name} has no bf16 arithmetic{since}"


def _refused(setting: str, lacks: str, network: str, native: NativeFormats, why: str = _BF16_WHY) -> str:
    """One sentence: the setting, what the device lacks, and that ``network`` stays in fp32."""
    if not native.read:  # nothing could be read: the CPU is not taken to have what it needs
        lacks = "which instructions this CPU has could not be read"
    reason = f" ({why})" if native.kind == "cpu" else ""
    return f"{setting}: {lacks}, so {network} stays in fp32{reason}."
