"""The README's two set-up commands: they stay two, stay inside a venv, and CI runs the test one;
the first installs the PyTorch build the machine can use (packaging/install_torch.py), saying first
what it costs.

A newcomer copies them verbatim onto a fresh machine whose system Python may refuse `pip install`
outside a virtual environment (PEP 668), so neither may call a bare `pip`/`python3 -m pip`.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent


def setup_commands() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = re.split(r"\n##+ ", readme.split("## Set up", 1)[1], maxsplit=1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S)]


def test_the_readme_gives_exactly_two_set_up_commands_one_for_the_service_and_one_for_the_tests() -> None:
    commands = setup_commands()
    assert len(commands) == 2, commands
    run, test = commands
    assert "\n" not in run, "the service command is one line a newcomer copies"
    assert "\n" not in test, "the test command is one line a newcomer copies"
    assert run.endswith("gpen-watch run")
    assert "pytest" in test


def test_both_commands_install_into_a_venv_never_into_the_system_python() -> None:
    for command in setup_commands():
        assert command.startswith("python3 -m venv .venv && "), command
        for step in command.split("&&")[1:]:
            assert step.strip().startswith(".venv/bin/"), f"{step.strip()!r} runs outside the venv"


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test = setup_commands()[1]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert test in ci.splitlines(), "the last step of .ci/run must be the README's test command"


def test_the_service_command_picks_pytorch_for_the_machine_before_installing_gpen_watch() -> None:
    steps = [step.strip() for step in setup_commands()[0].split("&&")]
    picker = steps.index(".venv/bin/python packaging/install_torch.py")
    assert picker < steps.index(".venv/bin/python -m pip install -e ."), steps


def _install_torch() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_torch", REPO / "packaging" / "install_torch.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_without_an_nvidia_gpu_linux_gets_the_cpu_build_and_is_told_the_cost_first() -> None:
    install_torch = _install_torch()
    cpu = install_torch.plan("linux", gpu=False)
    assert cpu.pip_args == ("torch", "--index-url", "https://download.pytorch.org/whl/cpu")
    assert "1.3 GB" in cpu.sentence and "6 GB" in cpu.sentence and "--gpu yes" in cpu.sentence
    cuda = install_torch.plan("linux", gpu=True)
    assert cuda.pip_args == ("torch",) and "6 GB" in cuda.sentence and "--gpu no" in cuda.sentence
    # PyPI's torch for Windows and macOS is no CUDA build: nothing to choose there.
    assert install_torch.plan("win32", gpu=False).pip_args == ("torch",)


def test_the_picker_says_its_plan_before_it_installs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "packaging" / "install_torch.py"), "--dry-run", "--gpu", "no"],
        capture_output=True,
        text=True,
        check=True,
    )
    sentence, command = done.stdout.splitlines()
    assert sentence.startswith("No NVIDIA GPU found: installing PyTorch's CPU build (about 1.3 GB")
    assert command.endswith("-m pip install torch --index-url https://download.pytorch.org/whl/cpu")
