"""Every precision setting is safe on every CPU: a number format the device would emulate runs as
fp32, with one sentence saying why (restore.runtime.formats), and each worker says the formats it
really runs.

The CPUs that are not this one are given as flag lists (``cpu_formats_of``), or to a worker
process through GPEN_WATCH_CPU_FLAGS; the real reading of this machine's CPU is checked against
its own /proc/cpuinfo.
"""

from __future__ import annotations

import json
import logging
import platform
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import TINY_GPEN, TinyModels, cli_env, restore_command
from dashboard_client import Dashboard, served_dashboard

from gpen_watch.config import RestoreConfig
from gpen_watch.restore.engines.gpen_family import runner
from gpen_watch.restore.engines.torch_networks import TorchNetworks, torch_label
from gpen_watch.restore.nets.gpen_model import GPENConfig, build_gpen
from gpen_watch.restore.nets.quant import int8_backend
from gpen_watch.restore.runtime import formats
from gpen_watch.restore.runtime.device import placement
from gpen_watch.restore.runtime.formats import CPU_FLAGS_ENV, cpu_formats_of
from gpen_watch.restore.stages.enhance import FaceEnhancer, resolve_parse_precision
from gpen_watch.service.notices import PROBLEM_TITLES, NoticeKind, NoticeTracker, facts_of
from gpen_watch.service.status import Status, from_json
from gpen_watch.tray import model as tray

# The CPUs measured (docs/benchmarks.md, "ParseNet's number format on each kind of CPU").
AVX2_ONLY = cpu_formats_of(frozenset({"avx", "avx2", "fma", "f16c"}), "a test")
AVX512_BF16 = cpu_formats_of(
    frozenset({"avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni"}), "a test"
)
AMX = cpu_formats_of(
    frozenset({"avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "amx_tile"}), "a test"
)
UNREAD = cpu_formats_of(None, "no reading of the CPU")
CPU = torch.device("cpu")
needs_int8 = pytest.mark.skipif(int8_backend() is None, reason="this torch has no int8 CPU engine")


def one_sentence(text: str) -> bool:
    return text.endswith(".") and ". " not in text.replace("e.g. ", "")


# --- what each CPU runs natively ----------------------------------------------------------------


def test_the_flags_say_which_formats_a_cpu_computes_in() -> None:
    assert (AVX2_ONLY.bf16, AVX2_ONLY.int8) == (False, False)
    assert (AVX512_BF16.bf16, AVX512_BF16.int8) == (True, True)
    assert (AMX.bf16, AMX.int8) == (True, True)
    # AVX-512 without its BF16 and VNNI parts (Skylake): neither.
    skylake = cpu_formats_of(frozenset({"avx2", "avx512f", "avx512bw"}), "a test")
    assert (skylake.bf16, skylake.int8) == (False, False)
    # VNNI on AVX alone (a client CPU without AVX-512) is int8's.
    assert cpu_formats_of(frozenset({"avx2", "avx_vnni"}), "a test").int8
    # Nothing read: neither is taken for native.
    assert (UNREAD.bf16, UNREAD.int8, UNREAD.read) == (False, False, False)


def test_proc_cpuinfo_is_read_on_x86_and_arm() -> None:
    x86 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16 avx512_vnni\n\nprocessor\t: 1\n"
    arm = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd asimddp bf16 i8mm sve\n"
    assert formats.parse_cpu_flags(x86) == {"fpu", "avx2", "avx512_bf16", "avx512_vnni"}
    graviton = cpu_formats_of(formats.parse_cpu_flags(arm), "/proc/cpuinfo")
    assert (graviton.bf16, graviton.int8) == (True, True)
    assert formats.parse_cpu_flags("processor\t: 0\n") == frozenset()


def test_this_machines_cpu_is_read_and_agrees_with_proc_cpuinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CPU_FLAGS_ENV, raising=False)
    here = formats.cpu_formats()
    assert here.kind == "cpu" and here.read, here
    assert f"torch's kernels {torch.backends.cpu.get_cpu_capability()}" in here.basis
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file() or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("no /proc/cpuinfo of an x86 CPU to compare with")
    flags = formats.parse_cpu_flags(cpuinfo.read_text())
    assert here.bf16 == bool(flags & {"avx512_bf16", "amx_bf16"}), (here, sorted(flags))
    assert here.int8 == bool(flags & {"avx512_vnni", "avx_vnni", "amx_int8"}), (here, sorted(flags))


def test_the_dev_hook_stands_in_for_the_cpus_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx2 fma")
    assert (formats.cpu_formats().bf16, formats.cpu_formats().int8) == (False, False)
    assert CPU_FLAGS_ENV in formats.cpu_formats().basis
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx512_bf16,amx_int8")
    assert (formats.cpu_formats().bf16, formats.cpu_formats().int8) == (True, True)


# --- the settings, resolved --------------------------------------------------------------------


def test_parse_precision_bf16_on_a_cpu_without_bf16_runs_fp32_with_one_sentence() -> None:
    place = placement("cpu", "auto", False)
    got, note = resolve_parse_precision("bf16", place, AVX2_ONLY)
    assert got == "fp32"
    assert note.startswith("restore.parse_precision = bf16: this CPU has no bf16 instructions")
    assert "ParseNet stays in fp32" in note and "8x slower" in note
    assert one_sentence(note), note
    # Where the CPU computes in bf16 it runs as asked, with nothing to say.
    assert resolve_parse_precision("bf16", place, AVX512_BF16) == ("bf16", "")
    assert resolve_parse_precision("bf16", place, AMX) == ("bf16", "")
    # What cannot be read is not taken to be there.
    got, note = resolve_parse_precision("bf16", place, UNREAD)
    assert got == "fp32" and "could not be read" in note and one_sentence(note)


@needs_int8
def test_parse_precision_int8_without_vnni_or_amx_runs_fp32_with_one_sentence() -> None:
    place = placement("cpu", "auto", False)
    got, note = resolve_parse_precision("int8", place, AVX2_ONLY)
    assert got == "fp32"
    assert note.startswith("restore.parse_precision = int8: this CPU has no int8 dot-product instructions")
    assert "no faster" in note and one_sentence(note), note
    assert resolve_parse_precision("int8", place, AVX512_BF16) == ("int8", "")
    assert resolve_parse_precision("int8", place, AMX) == ("int8", "")


def test_auto_and_fp32_need_nothing_of_the_cpu() -> None:
    place = placement("cpu", "auto", False)
    for cpu in (AVX2_ONLY, AVX512_BF16, AMX, UNREAD):
        assert resolve_parse_precision("auto", place, cpu) == ("auto", "")
        assert resolve_parse_precision("fp32", place, cpu) == ("fp32", "")
        # restore.precision = "auto" is fp32 on every CPU: the rule "auto" follows.
        assert placement("cpu", "auto", False, cpu).precision == "fp32"


def test_the_generators_bf16_on_a_cpu_without_bf16_runs_fp32_with_one_sentence() -> None:
    place = placement("cpu", "bf16", False, AVX2_ONLY)
    assert place.precision == "fp32"
    assert place.note.startswith("restore.precision = bf16: this CPU has no bf16 instructions")
    assert "the generator stays in fp32" in place.note and one_sentence(place.note)
    assert placement("cpu", "bf16", False, AMX) == placement("cpu", "bf16", False, AVX512_BF16)
    assert (placement("cpu", "bf16", False, AMX).precision, placement("cpu", "bf16", False, AMX).note) == (
        "bf16",
        "",
    )


def test_a_cuda_gpu_before_ampere_is_not_given_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU here: torch's answers about one are the edge replaced (a Tesla T4, 7.5).
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Tesla T4")
    t4 = formats.native_formats(torch.device("cuda:0"))
    assert (t4.kind, t4.bf16, t4.int8) == ("cuda", False, False)
    assert t4.name == "cuda:0 (Tesla T4, compute capability 7.5)"
    # "auto" (which torch's emulated bf16 could have chosen) lands on fp32 without a word.
    assert formats.generator_format("auto", "bf16", t4) == ("fp32", "")
    got, note = formats.generator_format("bf16", "bf16", t4)
    assert got == "fp32" and note.startswith(
        "restore.precision = bf16: cuda:0 (Tesla T4, compute capability 7.5)"
    )
    assert "compute capability 8.0 or later" in note and one_sentence(note)
    got, note = formats.parse_format("bf16", torch.device("cuda:0"), t4, False)
    assert got == "fp32" and "ParseNet stays in fp32" in note
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (8, 6))
    assert formats.native_formats(torch.device("cuda:0")).bf16
    # int8 has kernels on CPUs only: on a GPU ParseNet follows the generator.
    got, note = formats.parse_format("int8", torch.device("cuda:0"), t4, True)
    assert got == "auto" and note.startswith("restore.parse_precision = int8 runs on a CPU only")


def test_apples_gpu_is_not_checked() -> None:
    mps = formats.native_formats(torch.device("mps"))
    assert not mps.checked
    assert formats.generator_format("bf16", "bf16", mps) == ("bf16", "")
    assert formats.parse_format("bf16", torch.device("mps"), mps, False) == ("bf16", "")


def test_the_label_names_the_formats_that_run() -> None:
    assert formats.formats_label("fp32", None) == "fp32"
    assert formats.formats_label("fp32", "auto") == "fp32"
    assert formats.formats_label("fp32", "fp32") == "fp32"
    assert formats.formats_label("bf16", "auto") == "bf16"
    assert formats.formats_label("fp32", "int8") == "fp32, ParseNet int8"
    assert formats.formats_label("bf16", "fp32") == "bf16, ParseNet fp32"


# --- a worker's engine, its enhancer ----------------------------------------------------------


def _networks(monkeypatch: pytest.MonkeyPatch, flags: str, **changes: object) -> TorchNetworks:
    monkeypatch.setenv(CPU_FLAGS_ENV, flags)
    cfg = RestoreConfig(device="cpu", use_parse=True)
    for k, v in changes.items():
        setattr(cfg, k, v)
    nets = TorchNetworks(cfg, download=False, threads=None)
    nets.placement("cpu")
    return nets


def test_the_torch_engine_says_its_formats_and_each_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    torch_is = torch_label()
    nets = _networks(monkeypatch, "avx2 fma", parse_precision="bf16")
    assert nets.label == f"{torch_is}, fp32"
    assert nets.note.startswith("restore.parse_precision = bf16: this CPU has no bf16 instructions")
    assert one_sentence(nets.note)
    assert nets.parse_precision(placement("cpu", "auto", False)) == "fp32"
    # Both settings refused: a sentence each, the generator's first.
    both = _networks(monkeypatch, "avx2 fma", precision="bf16", parse_precision="bf16")
    assert both.label == f"{torch_is}, fp32"
    assert both.note.startswith("restore.precision = bf16:") and both.note.count("restore.") == 2
    # Where the CPU has them, what was asked runs, and the label says it.
    amx = _networks(monkeypatch, "avx512_bf16 amx_bf16 amx_int8", parse_precision="bf16")
    assert (amx.label, amx.note) == (f"{torch_is}, fp32, ParseNet bf16", "")
    assert _networks(monkeypatch, "avx512_bf16 amx_bf16", precision="bf16").label == f"{torch_is}, bf16"
    # No parser: only the generator's format.
    assert _networks(monkeypatch, "avx2", use_parse=False).label == f"{torch_is}, fp32"


def test_an_enhancer_given_bf16_on_a_cpu_without_it_parses_in_fp32_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from test_enhance import LabelMapParser

    monkeypatch.setenv(CPU_FLAGS_ENV, "avx2 fma")
    place = placement("cpu", "fp32", False)
    gpen = build_gpen(GPENConfig(**TINY_GPEN))
    with caplog.at_level(logging.WARNING, logger="gpen_watch.restore.stages.enhance"):
        enhancer = FaceEnhancer(runner(gpen, place), place, 2, LabelMapParser(), parse_precision="bf16")
    assert enhancer.parse_precision == "fp32"
    assert enhancer.parser is not None
    assert all(p.dtype == torch.float32 for p in enhancer.parser.parameters())
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("restore.parse_precision = bf16: this CPU has no bf16")


# --- through a real worker, to status, the Overview and the tray ------------------------------


@pytest.fixture(scope="module")
def avx2_service(
    tiny_models_with_parser: TinyModels, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dashboard]:
    """The real engine on the tiny models, ParseNet asked for in bf16, its worker on a CPU that
    says it is AVX2-only."""
    models = tiny_models_with_parser
    args = [
        "--model", str(models.gpen), "--model-dir", str(models.model_dir), "--device", "cpu",
        "--set", "restore.detector=retinaface_mobile0.25", "--set", "restore.use_parse=true",
        "--set", "restore.parse_precision=bf16",
    ]  # fmt: skip
    root = tmp_path_factory.mktemp("formats")
    with served_dashboard(root, *args, restorer=None, env={CPU_FLAGS_ENV: "avx2 fma"}) as d:
        yield d


@pytest.mark.slow
def test_the_refusal_reaches_status_the_overview_and_the_tray(avx2_service: Dashboard) -> None:
    d = avx2_service
    out = d.cli("status", "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    (w,) = s["workers"]
    assert w["engine"] == f"{torch_label()}, fp32", w
    note = w["engine_note"]
    assert note.startswith("restore.parse_precision = bf16: this CPU has no bf16 instructions"), w
    assert one_sentence(note)
    assert [p["text"] for p in s["problems"] if p["about"] == "engine"] == [note]

    lines = d.cli("status").stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  cpu#0"))
    assert f"{torch_label()}, fp32" in lines[at]
    assert lines[at + 1].strip() == f"note: {note}"

    html = d.get("/").text
    problems, _, workers = html.partition("<h2>Workers</h2>")
    assert f'<p class="banner warn engine-note">{note}</p>' in problems
    assert f"{torch_label()}, fp32</span>" in workers

    status = from_json(Status, d.status())
    view = tray.view_from_status(status)
    assert f"Engine: {torch_label()}, fp32" in [e.text for e in tray.menu(view)]
    assert view.problem == note
    notices = [n for n in NoticeTracker().update(facts_of(status)) if n.kind == NoticeKind.PROBLEM]
    assert [(n.title, n.message) for n in notices] == [(PROBLEM_TITLES["engine"], note)]
    # The log says it once: the parent, from the worker's Ready.
    assert Path(s["log_file"]).read_text().count(note) == 1


@pytest.mark.slow
def test_the_restore_command_says_the_refusal_once(
    tiny_models_with_parser: TinyModels, grace_hopper_path: Path, tmp_path: Path
) -> None:
    cmd = restore_command(
        tiny_models_with_parser, str(grace_hopper_path), "-o", str(tmp_path / "out"), "--set",
        "restore.parse_precision=bf16",
    )  # fmt: skip
    env = {**cli_env(tiny_models_with_parser), CPU_FLAGS_ENV: "avx2 fma"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("restore.parse_precision = bf16: this CPU has no bf16 instructions") == 1, (
        done.stderr
    )
