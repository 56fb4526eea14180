"""pyproject.toml's metadata in the form today's setuptools builds without a deprecation warning
(.ci/package_check builds the wheel and fails on any warning; this says why in a second)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def test_the_licence_is_an_spdx_expression_with_its_text_in_the_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    project = config["project"]
    # A table ({text = ...} or {file = ...}) is deprecated by setuptools 77 and refused from 2027.
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    # setuptools reads an SPDX license and license-files from 77 on.
    (floor,) = [r for r in config["build-system"]["requires"] if r.startswith("setuptools")]
    match = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", floor)
    assert match and int(match.group(1)) >= 77, floor
