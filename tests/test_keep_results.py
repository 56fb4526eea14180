"""Two results of one photo, in-process on a real journal and real files: a redo beside the
photo's result replaces nothing (not even a file of the user's that holds the name it would
take); keeping one puts it at the photo's name and removes the other or leaves it as the user's
(output.unkept_result); a keep a crash cut short is finished at the next start, whichever step
it stopped at. And the redo settings a comparison takes (another model, CodeFormer's fidelity)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_outbox import Env

from gpen_watch import config
from gpen_watch.base.errors import ConfigError
from gpen_watch.journal.records import Job
from gpen_watch.outbox import commit, keep, recovery, redo


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.journal.close()


def restored(env: Env, rel: str = "a.jpg", content: bytes = b"first result") -> Job:
    job_id = env.drop(rel, f"original {rel}".encode())
    commit.commit(env.journal, job_id, env.run_worker(job_id, content), env.cfg)
    return env.journal.require(job_id)


def beside(
    env: Env, of: Job, model: str = "GFPGAN-v1.4", content: bytes = b"beside result", **more: object
) -> Job:
    assert of.original_path is not None
    settings = {"restore.model": model, redo.BESIDE: True, **more}
    again = env.journal.add_redo(of, of.original_path, settings)
    commit.commit(env.journal, again.id, env.run_worker(again.id, content), env.cfg)
    return env.journal.require(again.id)


def ino(path: Path) -> int:
    return os.stat(path).st_ino


def test_a_redo_beside_replaces_nothing_and_the_photo_has_two_results(env: Env) -> None:
    first = restored(env)
    # A file of the user's holds the name the redo would take: it is left alone.
    (env.outbox / "a (GFPGAN-v1.4).jpg").write_bytes(b"the user's own")
    second = beside(env, first)
    assert second.output == env.outbox / "a (GFPGAN-v1.4) (1).jpg"
    assert (env.outbox / "a.jpg").read_bytes() == b"first result"
    assert (env.outbox / "a (GFPGAN-v1.4).jpg").read_bytes() == b"the user's own"
    assert second.output.read_bytes() == b"beside result"
    assert [r.id for r in env.journal.results_of(first)] == [first.id, second.id]
    assert env.journal.current_run(first) == second
    # A plain redo still replaces in place: the replaced run has no result of its own any more.
    plain = env.journal.add_redo(second, first.original_path or Path(), {"restore.strength": 0.5})
    commit.commit(env.journal, plain.id, env.run_worker(plain.id, b"again"), env.cfg)
    assert [r.id for r in env.journal.results_of(first)] == [first.id, plain.id]


def test_keeping_the_one_beside_puts_it_at_the_photos_name_and_removes_the_other(env: Env) -> None:
    first = restored(env)
    second = beside(env, first)
    assert second.output is not None
    kept_ino = ino(second.output)
    done = keep.keep(env.journal, env.cfg, second.id, first.id)
    assert (done.to, done.other_to) == (str(env.outbox / "a.jpg"), "")
    assert env.files(env.outbox) == ["a.jpg"]
    assert (env.outbox / "a.jpg").read_bytes() == b"beside result" and ino(env.outbox / "a.jpg") == kept_ino
    assert [r.id for r in env.journal.results_of(first)] == [second.id]
    assert env.journal.require(first.id).output is None
    assert env.journal.require(second.id).output == env.outbox / "a.jpg"
    kinds = {e.kind: e.detail for e in env.journal.history(first.id)}
    assert kinds["not-kept"] == f"run {second.id} was kept in its place; its file was removed"
    assert not keep.pending_path(env.journal).exists()
    # Decided: the same keep, or the other way round, is refused and changes nothing.
    for kept, other in ((second.id, first.id), (first.id, second.id)):
        with pytest.raises(keep.KeepRefused, match="are not two results of this photo"):
            keep.keep(env.journal, env.cfg, kept, other)
    assert env.files(env.outbox) == ["a.jpg"]


def test_keeping_the_first_with_unkept_keep_leaves_the_other_as_a_file_of_the_users(tmp_path: Path) -> None:
    env = Env(tmp_path, unkept_result="keep")
    try:
        first = restored(env)
        second = beside(env, first, "CodeFormer", **{"restore.fidelity": 0.7})
        assert second.output == env.outbox / "a (CodeFormer).jpg"
        keep.keep(env.journal, env.cfg, first.id, second.id)
        assert env.files(env.outbox) == ["a (CodeFormer).jpg", "a.jpg"]
        assert (env.outbox / "a.jpg").read_bytes() == b"first result"
        assert [r.id for r in env.journal.results_of(first)] == [first.id]
        assert env.journal.current_run(first) == env.journal.require(first.id)
        assert env.journal.require(second.id).output is None
        said = [e.detail for e in env.journal.history(second.id) if e.kind == "not-kept"]
        assert said == [
            f"run {first.id} was kept in its place; its file stays as {env.outbox / 'a (CodeFormer).jpg'}"
        ]
    finally:
        env.journal.close()


def test_keeping_the_one_beside_with_unkept_keep_gives_the_first_a_name_of_its_own(tmp_path: Path) -> None:
    env = Env(tmp_path, unkept_result="keep")
    try:
        first = restored(env)
        first_ino = ino(env.outbox / "a.jpg")
        second = beside(env, first)
        keep.keep(env.journal, env.cfg, second.id, first.id)
        # The first result had no record of its model (a worker that kept none): named by its run.
        stays = env.outbox / f"a (run {first.id}).jpg"
        assert env.files(env.outbox) == [stays.name, "a.jpg"]
        assert ino(stays) == first_ino and stays.read_bytes() == b"first result"
        assert (env.outbox / "a.jpg").read_bytes() == b"beside result"
    finally:
        env.journal.close()


def test_a_result_moved_away_is_refused_and_nothing_changes(env: Env) -> None:
    first = restored(env)
    second = beside(env, first)
    assert second.output is not None
    second.output.rename(env.root / "elsewhere.jpg")
    with pytest.raises(keep.KeepRefused, match=r"the result of run \d+ is not where gpen-watch left it"):
        keep.keep(env.journal, env.cfg, second.id, first.id)
    assert env.files(env.outbox) == ["a.jpg"] and (env.outbox / "a.jpg").read_bytes() == b"first result"
    assert not keep.pending_path(env.journal).exists()
    other = restored(env, "b.jpg")
    with pytest.raises(keep.KeepRefused, match="are not two results of this photo"):
        keep.keep(env.journal, env.cfg, other.id, first.id)


@pytest.mark.parametrize("stopped_after", ["written down", "other linked", "kept moved"])
def test_a_keep_a_crash_cut_short_is_finished_at_the_next_start(tmp_path: Path, stopped_after: str) -> None:
    """The keep written down, then cut short after none, one or both of its file steps: recovery
    finishes it, and the files and the journal agree."""
    env = Env(tmp_path, unkept_result="keep")
    try:
        first = restored(env)
        second = beside(env, first)
        decided = keep.plan(env.journal, env.cfg, second.id, first.id)
        keep.pending_path(env.journal).write_text(json.dumps(decided.__dict__))
        if stopped_after in ("other linked", "kept moved"):
            os.link(decided.to, decided.other_to)
        if stopped_after == "kept moved":
            os.replace(decided.kept_from, decided.to)
        journal = env.reopen()
        recovery.recover(journal, env.cfg)
        assert not keep.pending_path(journal).exists()
        assert env.files(env.outbox) == [Path(decided.other_to).name, "a.jpg"]
        assert (env.outbox / "a.jpg").read_bytes() == b"beside result"
        assert Path(decided.other_to).read_bytes() == b"first result"
        assert [r.id for r in journal.results_of(first)] == [second.id]
    finally:
        env.journal.close()


def test_the_redo_settings_of_a_comparison(env: Env, tmp_path: Path) -> None:
    job = restored(env)
    cfg = env.cfg
    own = redo.redo_config(
        cfg, job, {"restore.model": "CodeFormer", "restore.fidelity": 0.7, redo.BESIDE: True}
    )
    assert (own.restore.model, own.restore.fidelity) == ("CodeFormer", 0.7)
    with pytest.raises(ConfigError, match=r"restore\.fidelity: is a weight of CodeFormer only"):
        redo.redo_config(cfg, job, {"restore.model": "GFPGAN-v1.4", "restore.fidelity": 0.7})
    with pytest.raises(ConfigError, match="beside: true"):
        redo.check_settings({redo.BESIDE: "yes"})
    # The new families by name, on the command line and in an inbox's profile.
    assert config.load(None, {"restore.model": "GFPGAN-v1.4"}).restore.model == "GFPGAN-v1.4"
    text = f'[[watch.inboxes]]\npath = "{tmp_path}"\nrestore = {{model = "CodeFormer", fidelity = 0.7}}\n'
    profile = config.inbox_profiles(config.from_text(text, tmp_path / "c.toml"))[0][1]
    assert (profile.model, profile.fidelity) == ("CodeFormer", 0.7)
