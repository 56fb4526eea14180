"""The README's two set-up commands: they stay two, stay inside a venv, and CI runs the test one.

A newcomer copies them verbatim onto a fresh machine whose system Python may refuse `pip install`
outside a virtual environment (PEP 668), so neither may call a bare `pip`/`python3 -m pip`.
"""

from __future__ import annotations

import re
from pathlib import Path

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
