"""The package's shape: imports between gpen_watch's modules form no cycle (the layers between its
packages are import-linter's contract in pyproject.toml), and the parent's stages
load no imaging or ML library until they have a photo to look at."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import heavy_modules_after

PACKAGE = Path(__file__).resolve().parent.parent / "gpen_watch"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """gpen_watch modules that ``path`` imports, at any depth (lazy imports in functions count:
    a cycle through them still makes the two modules one unit to understand)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m in modules}


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    # A package's __init__ re-exports: importing the package is not a dependency on all of it.
    return {
        name: imports(path, modules) - {name} for name, path in files.items() if path.name != "__init__.py"
    }


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_between_gpen_watch_modules() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_watcher_journal_and_outbox_need_neither_torch_nor_pillow_nor_opencv() -> None:
    # The parent imported Pillow and OpenCV at start just to learn the extensions and suffixes.
    code = (
        "import gpen_watch.watch.watcher, gpen_watch.journal, gpen_watch.outbox.recovery\n"
        "import gpen_watch.service.control, gpen_watch.modelstore.needs\n"
        "from gpen_watch.watch.filters import supported_extensions\n"
        "from gpen_watch.outbox.commit import output_name\n"
        "assert '.jpg' in supported_extensions() and output_name('a.jpg', 'PNG') == 'a.png'\n"
    )
    assert heavy_modules_after(code, ("torch", "cv2", "PIL", "numpy")) == []


def test_the_service_and_its_pool_import_ray_only_in_cluster_mode() -> None:
    # Ray (hundreds of MB, its own threads) is for cluster.address users only; the cluster package
    # itself imports it lazily, when it connects.
    code = (
        "import gpen_watch.cli, gpen_watch.service.daemon, gpen_watch.dispatch.pool\n"
        "import gpen_watch.cluster.membership, gpen_watch.cli.cluster\n"
        "gpen_watch.cli.build_parser()\n"
    )
    assert heavy_modules_after(code, ("ray", "torch", "cv2")) == []


def test_the_package_root_holds_at_most_six_modules() -> None:
    # Everything else has a package that says what it is (base/, platform/, config/, cli/, ...).
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= 6, root


# The ways Python code asks which OS it runs on: sys.platform, os.name, and the platform module's
# system(), uname(), win32_ver(), mac_ver() (plus `from sys import platform` and the like).
_ASKING_ATTRS = {("sys", "platform"), ("os", "name")} | {
    ("platform", f) for f in ("system", "uname", "win32_ver", "mac_ver", "platform")
}


def asks_which_os(source: str) -> list[int]:
    """Lines of ``source`` that read sys.platform, os.name or platform.system() and their kin."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            asked = [(node.value.id, node.attr)]
        elif isinstance(node, ast.ImportFrom):
            asked = [(node.module or "", a.name) for a in node.names]
        else:
            continue
        if any(pair in _ASKING_ATTRS for pair in asked):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_os_question_finder_finds_each_way_of_asking() -> None:
    source = (
        "import os, sys, platform\n"
        "a = sys.platform == 'win32'\n"
        "b = os.name == 'nt'\n"
        "c = platform.system()\n"
        "from sys import platform as p\n"
        "from os import name\n"
        "from platform import system\n"
        "d = os.sep, sys.version_info, os.path.join('a', 'b'), obj.name, platforms.current().libc\n"
    )
    assert asks_which_os(source) == [2, 3, 4, 5, 6, 7]


def test_only_the_platform_package_asks_which_os_it_runs_on() -> None:
    # Every OS difference is behind gpen_watch.platform (its Platform classes, paths, filelock,
    # files), so a new OS is a new module there rather than a hunt through the code.
    platform_dir = PACKAGE / "platform"
    asking = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if platform_dir not in path.parents
        for line in asks_which_os(path.read_text(encoding="utf-8"))
    ]
    assert asking == []


MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines() -> None:
    """A module past this does more than one job: split it where its parts read apart."""
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
