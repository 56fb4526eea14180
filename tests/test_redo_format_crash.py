"""A redo into another format puts its result under a new name ("a.png" for "a.jpg") and then
removes the result it replaces. A crash between the two, at any of the commit's steps, must still
leave the photo one result, the new one, once the service starts again (``recovery.recover``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_outbox import Env

from gpen_watch.journal.states import JobState
from gpen_watch.outbox import commit, durable, recovery
from gpen_watch.outbox.redo import BESIDE, original_of
from gpen_watch.restore.api import FileResult

# Where the crash comes: the commit token recorded and nothing placed; the new name linked to the
# temp file and the temp name still there; the result placed (temp name gone) and the old result
# not yet removed.
STEPS = ("token", "linked", "placed")


def _redo_cut_off(env: Env, step: str, settings: dict[str, object]) -> int:
    """Run ``a.jpg``, then a redo of it as PNG up to ``step``, and start again as after a crash."""
    first = env.drop("a.jpg")
    commit.commit(env.journal, first, env.run_worker(first), env.cfg)
    photo = env.journal.require(first)
    (redo,) = env.journal.add_redos([(photo, original_of(photo))], {"output.format": "png", **settings})
    result = env.run_worker(redo.id, b"redone photo")
    assert result.dst is not None
    durable.fsync_file(result.dst)
    st = result.dst.stat()
    new = env.outbox / ("a (run 2).png" if settings else "a.png")
    assert env.journal.begin_commit(redo.id, new, st.st_ino, st.st_size, 2, {}, [])
    if step in ("linked", "placed"):
        os.link(result.dst, new)
    if step == "placed":
        os.unlink(result.dst)
    env.reopen()
    assert recovery.recover(env.journal, env.cfg).finished == [redo.id]
    return redo.id


@pytest.mark.parametrize("step", STEPS)
def test_a_redo_in_another_format_cut_off_leaves_the_new_result_alone(tmp_path: Path, step: str) -> None:
    env = Env(tmp_path)
    redo_id = _redo_cut_off(env, step, {})
    assert env.files(env.outbox) == ["a.png"]
    assert (env.outbox / "a.png").read_bytes() == b"redone photo"
    done = env.journal.require(redo_id)
    assert (done.state, done.output) == (JobState.DONE, env.outbox / "a.png")
    env.journal.close()


def test_a_redo_placed_beside_the_result_keeps_both_after_a_crash(tmp_path: Path) -> None:
    # Beside redos are compared with the photo's result until one is kept: neither goes.
    env = Env(tmp_path)
    _redo_cut_off(env, "placed", {BESIDE: True})
    assert env.files(env.outbox) == ["a (run 2).png", "a.jpg"]
    assert (env.outbox / "a.jpg").read_bytes() == b"restored photo"
    env.journal.close()


def test_a_redo_in_another_format_uncut_leaves_one_result(tmp_path: Path) -> None:
    env = Env(tmp_path)
    first = env.drop("a.jpg")
    commit.commit(env.journal, first, env.run_worker(first), env.cfg)
    photo = env.journal.require(first)
    (redo,) = env.journal.add_redos([(photo, original_of(photo))], {"output.format": "png"})
    res = env.run_worker(redo.id, b"redone photo")
    commit.commit(env.journal, redo.id, FileResult(**{**res.__dict__, "format": "PNG"}), env.cfg)
    assert env.files(env.outbox) == ["a.png"]
    env.journal.close()
