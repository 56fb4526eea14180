"""Outbox: names that cannot escape or overwrite, crash-safe commits, and failed/ with reasons."""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import heavy_modules_after

from gpen_watch.base.errors import ConfigError, OutputError
from gpen_watch.base.fsutil import FOLDER_REFUSES
from gpen_watch.config import Config, InboxConfig, OutputConfig, WatchConfig
from gpen_watch.journal import Journal, hash_file
from gpen_watch.journal.journal import Twin
from gpen_watch.journal.states import JobState, Original
from gpen_watch.outbox import commit, duplicates, durable, failed, moves, naming, originals, recovery
from gpen_watch.restore.api import FileResult

REPO = Path(__file__).resolve().parents[1]


# --- fixtures -----------------------------------------------------------------------------------


class Env:
    def __init__(self, tmp_path: Path, **output: object) -> None:
        self.root = tmp_path
        self.inbox = tmp_path / "GPEN" / "inbox"
        self.outbox = tmp_path / "GPEN" / "outbox"
        self.failed = tmp_path / "GPEN" / "failed"
        self.archive = tmp_path / "GPEN" / "originals"
        self.inbox.mkdir(parents=True)
        self.cfg = Config(
            watch=WatchConfig(inboxes=[InboxConfig(self.inbox)], outbox=self.outbox),
            output=OutputConfig(**output),  # type: ignore[arg-type]
        )
        self.journal = Journal.open(tmp_path / "state" / "journal.sqlite3")

    def reopen(self) -> Journal:
        """As after a crash: a new connection on the same file."""
        self.journal.close()
        self.journal = Journal.open(self.root / "state" / "journal.sqlite3")
        return self.journal

    def drop(self, rel: str, content: bytes = b"original photo") -> int:
        path = self.inbox / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        st = path.stat()
        r = self.journal.add(path, self.inbox, rel, st.st_size, st.st_mtime, hash_file(path))
        return r.job.id

    def run_worker(self, job_id: int, content: bytes = b"restored photo") -> FileResult:
        """Claim, prepare, and write the result where a worker would."""
        claimed = self.journal.claim_batch(1, "w0").jobs
        assert [j.id for j in claimed] == [job_id]
        fj = commit.file_job(self.journal, job_id, self.cfg)
        fj.dst.write_bytes(content)
        return FileResult(
            src=fj.src, ok=True, dst=fj.dst, faces=2, timings={"restore": 0.5}, notes=["2 faces"]
        )

    def files(self, folder: Path) -> list[str]:
        if not folder.exists():
            return []
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink())


@pytest.fixture
def env(tmp_path: Path):
    e = Env(tmp_path)
    yield e
    e.journal.close()


# --- naming -------------------------------------------------------------------------------------


def test_render_name_fields_and_format_extension() -> None:
    day = dt.date(2024, 5, 1)
    assert naming.render_name("{stem}{ext}", "IMG_1.JPG", today=day) == "IMG_1.JPG"
    assert naming.render_name("{stem}{ext}", "IMG_1.JPG", fmt="png") == "IMG_1.png"
    assert naming.render_name("{stem}_{model}_{date}{ext}", "a.jpg", model="GPEN-BFR-512", today=day) == (
        "a_GPEN-BFR-512_2024-05-01.jpg"
    )
    assert naming.render_name("restored {name}", "a.tif", fmt="jpeg") == "restored a.tif"


@pytest.mark.parametrize(
    "src",
    [
        "../../etc/passwd.jpg",
        "/etc/passwd.jpg",
        "..\\..\\win.ini.jpg",
        "a/../../b.jpg",
        "..",
        ".bashrc",
        "nul\0byte.jpg",
        "new\nline.jpg",
    ],
)
def test_names_can_never_leave_the_folder(src: str, tmp_path: Path) -> None:
    name = naming.render_name("{stem}{ext}", src)
    assert "/" not in name
    assert "\\" not in name
    assert "\0" not in name
    assert "\n" not in name
    assert not name.startswith(".")
    assert name not in ("", ".", "..")
    out = naming.free_name(tmp_path, name)
    assert out.parent == tmp_path


def test_names_follow_the_rules_of_the_os_they_are_written_on() -> None:
    # Windows' rules (platform.windows) are checked anywhere through its Platform object.
    from gpen_watch.platform import current

    windows, linux = current("win32"), current("linux")
    cases = {
        'a<b>:c"d|e?f*.jpg': ("a_b__c_d_e_f_.jpg", 'a<b>:c"d|e?f*.jpg'),
        "nul.jpg": ("_nul.jpg", "nul.jpg"),
        "COM1": ("_COM1", "COM1"),
        "com10.jpg": ("com10.jpg", "com10.jpg"),
        "photo. . ": ("photo", "photo. . "),
        "..": ("_", "_"),
    }
    for raw, (on_windows, on_linux) in cases.items():
        assert naming.sanitize_component(raw, platform=windows) == on_windows, raw
        assert naming.sanitize_component(raw, platform=linux) == on_linux, raw
    assert naming.sanitize_component(" . ", fallback="output.jpg", platform=windows) == "output.jpg"


def test_injected_template_fields_are_refused() -> None:
    from gpen_watch import config

    for bad in ("{stem.__class__}", "{stem!r}", "{stem:>9999}", "{path}", "{0}", "{stem", "{stem!s:>5}{ext}"):
        with pytest.raises(ConfigError, match=re.escape("output.name_template")):
            naming.render_name(bad, "a.jpg")
        # ...and already when the config is loaded: a template accepted there and refused per photo
        # let the service start and then stop at the first photo.
        with pytest.raises(ConfigError, match=re.escape("output.name_template")):
            config.load(Path("/nonexistent.toml"), {"output.name_template": bad})


def test_long_names_are_cut_to_fit_with_their_extension() -> None:
    name = naming.render_name("{stem}{ext}", "é" * 300 + ".jpeg")
    assert len(name.encode()) <= naming.MAX_NAME_BYTES
    assert name.endswith(".jpeg")
    name.encode().decode()  # cut on a character boundary
    tmp = naming.tmp_path(Path("/o") / name, 123456789)
    assert len(tmp.name.encode()) <= 255
    assert naming.tmp_job_id(tmp.name) == 123456789
    assert naming.tmp_job_id("photo.jpg") is None
    assert naming.tmp_job_id(".x.gpen-tmp-") is None
    # The image writer's temp for a worker's temp output (left by a worker killed while saving).
    assert naming.tmp_job_id(f".{tmp.name}.tmp-0a1b2c3d") == 123456789
    assert naming.tmp_job_id(f".{tmp.name}.tmp-zz") is None


def test_free_name_never_reuses_an_existing_or_reserved_name(tmp_path: Path) -> None:
    (tmp_path / "a.jpg").write_bytes(b"x")
    (tmp_path / "a (1).jpg").symlink_to(tmp_path / "nowhere")  # a dangling link still holds the name
    reserved = {tmp_path / "a (2).jpg"}
    assert naming.free_name(tmp_path, "a.jpg", taken=reserved.__contains__) == tmp_path / "a (3).jpg"
    assert naming.free_name(tmp_path, "b.jpg") == tmp_path / "b.jpg"


def test_output_mirrors_the_subfolder_under_the_right_outbox(tmp_path: Path) -> None:
    own = InboxConfig(tmp_path / "scans", outbox=tmp_path / "scans-out")
    cfg = Config(
        watch=WatchConfig(inboxes=[InboxConfig(tmp_path / "in"), own], outbox=tmp_path / "out"),
        output=OutputConfig(format="png"),
    )
    assert naming.plan_output(cfg, cfg.watch.inboxes[0], "2024/May/a.jpg") == tmp_path / "out/2024/May/a.png"
    assert naming.plan_output(cfg, own, "a.jpg") == tmp_path / "scans-out/a.png"
    assert naming.mirror_dir(tmp_path / "out", "../x/./../y") == tmp_path / "out/x/y"
    dirs = naming.service_dirs(cfg)
    assert tmp_path / "failed" in dirs
    assert tmp_path / "originals" in dirs
    assert tmp_path / "scans-out" in dirs
    assert naming.find_inbox(cfg, tmp_path / "scans") is own
    assert naming.find_inbox(cfg, tmp_path / "removed").path == tmp_path / "removed"


def test_ensure_dir_refuses_a_symlinked_subfolder_leading_out(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "sub").symlink_to(elsewhere)
    with pytest.raises(OutputError, match="outside"):
        naming.ensure_dir(out / "sub" / "deeper", out)
    naming.ensure_dir(out / "fine" / "deeper", out)


def test_output_name_is_reserved_in_the_journal_across_restarts(env: Env) -> None:
    a, b, c = env.drop("a.jpg", b"A"), env.drop("x/a.jpg", b"B"), env.drop("again/a.jpg", b"C")
    env.journal.claim_batch(3, "w0")
    final_a, _ = commit.prepare(env.journal, a, env.cfg)
    env.reopen()  # restart before anything was written
    again, _ = commit.prepare(env.journal, a, env.cfg)
    assert again == final_a == env.outbox / "a.jpg"
    assert commit.prepare(env.journal, b, env.cfg)[0] == env.outbox / "x" / "a.jpg"
    assert commit.prepare(env.journal, c, env.cfg)[0] == env.outbox / "again" / "a.jpg"


def test_two_jobs_with_the_same_output_name_get_different_names(env: Env) -> None:
    env.cfg.output.name_template = "restored{ext}"
    a, b = env.drop("a.jpg", b"A"), env.drop("b.jpg", b"B")
    env.journal.claim_batch(2, "w0")
    fa, ta = commit.prepare(env.journal, a, env.cfg)
    fb, _tb = commit.prepare(env.journal, b, env.cfg)
    assert (fa.name, fb.name) == ("restored.jpg", "restored (1).jpg")
    assert ta.name == f".restored.jpg.gpen-tmp-{a}"
    assert ta.parent == fa.parent


# --- commit -------------------------------------------------------------------------------------


def test_commit_publishes_finishes_then_archives_the_original(env: Env) -> None:
    job_id = env.drop("2024/a.jpg")
    result = env.run_worker(job_id)
    outcome = commit.commit(env.journal, job_id, result, env.cfg)
    assert outcome.output == env.outbox / "2024" / "a.jpg"
    assert (env.outbox / "2024" / "a.jpg").read_bytes() == b"restored photo"
    assert env.files(env.outbox) == ["2024/a.jpg"]  # temp name gone
    assert outcome.original is not None
    assert outcome.original.action == "archived"
    assert env.files(env.archive) == ["2024/a.jpg"]
    assert env.files(env.inbox) == []
    job = env.journal.get(job_id)
    assert job is not None
    assert job.state == "done"
    assert job.faces == 2
    assert job.timings == {"restore": 0.5}
    assert job.original == "archived"
    assert job.original_path == env.archive / "2024" / "a.jpg"
    kinds = [e.kind for e in env.journal.history(job_id)]
    assert kinds.index("committing") < kinds.index("finished") < kinds.index("original")


def test_commit_never_overwrites_a_file_that_took_the_name_meanwhile(env: Env) -> None:
    job_id = env.drop("a.jpg")
    result = env.run_worker(job_id)
    (env.outbox / "a.jpg").write_bytes(b"somebody else's file")
    (env.archive).mkdir(parents=True)
    (env.archive / "a.jpg").write_bytes(b"an older original")
    outcome = commit.commit(env.journal, job_id, result, env.cfg)
    assert outcome.output == env.outbox / "a (1).jpg"
    assert (env.outbox / "a.jpg").read_bytes() == b"somebody else's file"
    assert (env.archive / "a.jpg").read_bytes() == b"an older original"
    assert (env.archive / "a (1).jpg").read_bytes() == b"original photo"
    assert env.journal.get(job_id).output == env.outbox / "a (1).jpg"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("dropped", "fmt", "output"),
    [
        ("really-a-jpeg.png", "JPEG", "really-a-jpeg.jpg"),  # content decides the format, and so the name
        ("anim.gif", "PNG", "anim.png"),  # an animated GIF is written as PNG
        ("a.JPEG", "JPEG", "a.JPEG"),  # a name that already fits keeps its spelling
        ("scan.tiff", "TIFF", "scan.tiff"),
        ("anim2.gif", "GIF", "anim2.gif"),  # copied as it was: a format we do not write keeps its name
        ("b.jpg", None, "b.jpg"),  # the worker did not say
    ],
)
def test_output_is_named_after_the_format_written(
    env: Env, dropped: str, fmt: str | None, output: str
) -> None:
    job_id = env.drop(dropped)
    result = env.run_worker(job_id)
    result.format = fmt
    outcome = commit.commit(env.journal, job_id, result, env.cfg)
    assert outcome.output == env.outbox / output
    assert env.files(env.outbox) == [output]
    assert env.journal.get(job_id).output == env.outbox / output  # type: ignore[union-attr]


def test_keep_and_delete_policies(tmp_path: Path) -> None:
    keep = Env(tmp_path / "k", originals="keep")
    job_id = keep.drop("a.jpg")
    out = commit.commit(keep.journal, job_id, keep.run_worker(job_id), keep.cfg)
    assert out.original is not None
    assert out.original.action == "kept"
    assert keep.files(keep.inbox) == ["a.jpg"]
    # A rescan sees the kept original again: it is known, not a new job.
    st = (keep.inbox / "a.jpg").stat()
    again = keep.journal.add(
        keep.inbox / "a.jpg", keep.inbox, "a.jpg", st.st_size, st.st_mtime, hash_file(keep.inbox / "a.jpg")
    )
    assert again.status == "known"

    delete = Env(tmp_path / "d", originals="delete")
    job_id = delete.drop("a.jpg")
    out = commit.commit(delete.journal, job_id, delete.run_worker(job_id), delete.cfg)
    assert out.original is not None
    assert out.original.action == "deleted"
    assert delete.files(delete.inbox) == []
    assert delete.files(delete.outbox) == ["a.jpg"]


def test_delete_spares_an_original_replaced_by_different_content(tmp_path: Path) -> None:
    e = Env(tmp_path, originals="delete")
    job_id = e.drop("a.jpg", b"first")
    result = e.run_worker(job_id)
    st = (e.inbox / "a.jpg").stat()
    (e.inbox / "a.jpg").write_bytes(b"other")  # same size...
    os.utime(e.inbox / "a.jpg", ns=(st.st_atime_ns, st.st_mtime_ns))  # ...and mtime: only the hash tells
    out = commit.commit(e.journal, job_id, result, e.cfg)
    assert out.original is not None
    assert out.original.action == "replaced"
    assert (e.inbox / "a.jpg").read_bytes() == b"other"


def test_archive_leaves_a_replaced_or_missing_original_alone(env: Env) -> None:
    a, b = env.drop("a.jpg"), env.drop("b.jpg", b"bee")
    ra, rb = env.run_worker(a), env.run_worker(b)
    (env.inbox / "a.jpg").write_bytes(b"a newer, longer photo")
    (env.inbox / "b.jpg").unlink()
    assert commit.commit(env.journal, a, ra, env.cfg).original.action == "replaced"  # type: ignore[union-attr]
    assert commit.commit(env.journal, b, rb, env.cfg).original.action == "missing"  # type: ignore[union-attr]
    assert env.files(env.inbox) == ["a.jpg"]


def test_result_for_a_job_no_longer_active_is_discarded(env: Env) -> None:
    job_id = env.drop("a.jpg")
    result = env.run_worker(job_id)
    env.journal.fail(job_id, "timed out")
    assert commit.commit(env.journal, job_id, result, env.cfg).output is None
    assert env.files(env.outbox) == []


def test_missing_worker_output_is_an_output_error_and_nothing_moves(env: Env) -> None:
    job_id = env.drop("a.jpg")
    result = env.run_worker(job_id)
    assert result.dst is not None
    result.dst.unlink()
    with pytest.raises(OutputError, match="cannot be read"):
        commit.commit(env.journal, job_id, result, env.cfg)
    assert env.files(env.inbox) == ["a.jpg"]
    assert env.journal.get(job_id).state == "running"  # type: ignore[union-attr]


# --- crashes between the steps: run the steps by hand, "crash" (reopen), recover ----------------


def _assert_finished_once(env: Env, job_id: int, rel: str = "a.jpg") -> None:
    job = env.journal.get(job_id)
    assert job is not None
    assert job.state == "done"
    assert job.original == "archived"
    assert env.files(env.outbox) == [rel]
    assert (env.outbox / rel).read_bytes() == b"restored photo"
    assert env.files(env.archive) == [rel]
    assert env.files(env.inbox) == []


def test_crash_before_publish_requeues_and_removes_the_temp(env: Env) -> None:
    job_id = env.drop("a.jpg")
    env.run_worker(job_id, b"half a resto")  # worker killed mid-write: partial temp file
    env.reopen()
    report = recovery.recover(env.journal, env.cfg)
    assert report.requeued == 1
    assert report.temps_removed == 1
    assert report.finished == []
    assert env.files(env.outbox) == []
    assert env.files(env.inbox) == ["a.jpg"]
    # Redone: the reserved name is reused, the output appears once.
    result = env.run_worker(job_id)
    commit.commit(env.journal, job_id, result, env.cfg)
    _assert_finished_once(env, job_id)
    assert env.journal.get(job_id).attempts == 2  # type: ignore[union-attr]


def test_recovery_removes_the_image_writers_temp_left_by_a_killed_worker(env: Env) -> None:
    job_id = env.drop("a.jpg")
    env.journal.claim_batch(1, "w0")
    fj = commit.file_job(env.journal, job_id, env.cfg)
    writer_tmp = fj.dst.parent / f".{fj.dst.name}.tmp-0a1b2c3d"  # save_image was writing this
    writer_tmp.write_bytes(b"half an enc")
    env.reopen()
    report = recovery.recover(env.journal, env.cfg)
    assert report.requeued == 1
    assert report.temps_removed == 1
    assert env.files(env.outbox) == []
    assert env.files(env.inbox) == ["a.jpg"]


def test_crash_after_token_before_link_publishes_the_complete_temp(env: Env) -> None:
    job_id = env.drop("a.jpg")
    result = env.run_worker(job_id)
    assert result.dst is not None
    durable.fsync_file(result.dst)
    st = result.dst.stat()
    env.journal.begin_commit(job_id, env.outbox / "a.jpg", st.st_ino, st.st_size, 2, {}, [])
    env.reopen()
    report = recovery.recover(env.journal, env.cfg)
    assert report.finished == [job_id]
    assert report.requeued == 0
    _assert_finished_once(env, job_id)


def test_crash_after_link_before_temp_removed(env: Env) -> None:
    job_id = env.drop("a.jpg")
    result = env.run_worker(job_id)
    assert result.dst is not None
    st = result.dst.stat()
    env.journal.begin_commit(job_id, env.outbox / "a.jpg", st.st_ino, st.st_size, 2, {}, [])
    os.link(result.dst, env.outbox / "a.jpg")
    env.reopen()
    assert recovery.recover(env.journal, env.cfg).finished == [job_id]
    _assert_finished_once(env, job_id)
    assert "finished after a restart" in env.journal.get(job_id).notes[-1]  # type: ignore[union-attr]


def test_crash_after_publish_before_done_is_finished_not_redone(env: Env) -> None:
    job_id = env.drop("a.jpg")
    assert commit.publish(env.journal, job_id, env.run_worker(job_id)) == env.outbox / "a.jpg"
    env.reopen()
    report = recovery.recover(env.journal, env.cfg)
    assert report.finished == [job_id]
    assert report.requeued == 0
    _assert_finished_once(env, job_id)
    assert env.journal.get(job_id).faces == 2  # the worker's result survived in the token  # type: ignore[union-attr]


def test_crash_after_done_before_original_archived(env: Env) -> None:
    job_id = env.drop("a.jpg")
    final = commit.publish(env.journal, job_id, env.run_worker(job_id))
    assert final is not None
    env.journal.finish(job_id, final, 2)
    env.reopen()
    assert recovery.recover(env.journal, env.cfg).originals == 1
    _assert_finished_once(env, job_id)


def test_crash_in_the_middle_of_archiving(env: Env) -> None:
    job_id = env.drop("a.jpg")
    final = commit.publish(env.journal, job_id, env.run_worker(job_id))
    assert final is not None
    env.journal.finish(job_id, final, 2)
    dest = env.archive / "a.jpg"
    dest.parent.mkdir(parents=True)
    env.journal.set_original(job_id, "archiving", dest)
    os.link(env.inbox / "a.jpg", dest)  # linked, but the inbox name not yet removed
    env.reopen()
    recovery.recover(env.journal, env.cfg)
    _assert_finished_once(env, job_id)


def test_a_foreign_file_at_the_final_name_is_not_mistaken_for_our_output(env: Env) -> None:
    job_id = env.drop("a.jpg")
    result = env.run_worker(job_id, b"half")  # partial, never committed
    (env.outbox / "a.jpg").write_bytes(b"restored photo")  # same size as ours would be, not ours
    env.reopen()
    report = recovery.recover(env.journal, env.cfg)
    assert report.finished == []
    assert report.requeued == 1
    assert result.dst is not None
    assert not result.dst.exists()


# The start of a script that SIGKILLs its own process at the kill_at-th call of whatever it wraps
# with crashing(): a real crash before each file-system or journal step in turn.
_CRASH_AT_STEP = textwrap.dedent(
    """
    import json, os, signal, sys
    from pathlib import Path
    from gpen_watch.config import Config, InboxConfig, WatchConfig
    from gpen_watch.journal import Journal
    from gpen_watch.outbox import durable

    args = json.loads(sys.argv[1])
    kill_at = args["kill_at"]
    calls = 0

    def crashing(fn):
        def wrapper(*a, **kw):
            global calls
            calls += 1
            if calls == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return fn(*a, **kw)
        return wrapper

    for name in ("link", "unlink", "rename", "replace"):
        setattr(os, name, crashing(getattr(os, name)))
    """
)

_CRASHING_COMMIT = _CRASH_AT_STEP + textwrap.dedent(
    """
    from gpen_watch.outbox import commit
    from gpen_watch.restore.api import FileResult

    for name in ("fsync_file", "fsync_dir"):
        setattr(durable, name, crashing(getattr(durable, name)))
    for name in ("begin_commit", "finish", "set_original"):
        setattr(Journal, name, crashing(getattr(Journal, name)))

    cfg = Config(watch=WatchConfig(inboxes=[InboxConfig(Path(args["inbox"]))], outbox=Path(args["outbox"])))
    j = Journal.open(args["journal"])
    result = FileResult(src=Path(args["src"]), ok=True, dst=Path(args["tmp"]), faces=1)
    commit.commit(j, args["job"], result, cfg)
    print("completed", calls, flush=True)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_at_every_step_of_a_commit_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    """A real process is killed before each file-system or journal step of commit() in turn."""
    kill_at = 1
    while True:
        e = Env(tmp_path / f"k{kill_at}")
        job_id = e.drop("sub/a.jpg")
        result = e.run_worker(job_id)
        e.journal.close()
        args = {
            "kill_at": kill_at,
            "inbox": str(e.inbox),
            "outbox": str(e.outbox),
            "src": str(result.src),
            "journal": str(e.root / "state" / "journal.sqlite3"),
            "job": job_id,
            "tmp": str(result.dst),
        }
        proc = subprocess.run(
            [sys.executable, "-c", _CRASHING_COMMIT, json.dumps(args)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=60,
        )
        completed = proc.returncode == 0
        assert completed or proc.returncode == -signal.SIGKILL, proc.stderr
        e.journal = Journal.open(e.root / "state" / "journal.sqlite3")
        recovery.recover(e.journal, e.cfg)
        if e.journal.get(job_id).state == "queued":  # type: ignore[union-attr]
            # Nothing was published: the job runs again, start to finish.
            commit.commit(e.journal, job_id, e.run_worker(job_id), e.cfg)
        _assert_finished_once(e, job_id, "sub/a.jpg")
        assert e.journal.integrity_check() == "ok"
        e.journal.close()
        if completed:
            break
        kill_at += 1
    print(f"commit interrupted at each of {kill_at - 1} steps")
    assert kill_at > 8  # every step of the commit was interrupted once


# --- failed/ ------------------------------------------------------------------------------------


def test_a_failure_removes_the_outbox_folders_made_for_it_and_nothing_else(env: Env) -> None:
    """fli_oob/04r/'s only file failed after its output name was reserved: 04r/ stayed, empty."""
    (env.outbox / "mine").mkdir(parents=True)  # the user's own, empty: not ours to remove
    only = env.drop("fli_oob/04r/only.fli", b"a broken animation")
    theirs = env.drop("mine/bad.jpg", b"not really a jpeg")
    for job_id in (only, theirs):
        result = env.run_worker(job_id)
        assert result.dst is not None and result.dst.parent.is_dir()
        env.reopen()  # what was made is remembered across a restart
        failed.fail(env.journal, job_id, "damaged FLI", env.cfg, tmp=result.dst)
    assert sorted(p.name for p in env.outbox.iterdir()) == ["mine"]
    assert env.files(env.failed) == [
        "fli_oob/04r/only.fli",
        "fli_oob/04r/only.fli.error.txt",
        "mine/bad.jpg",
        "mine/bad.jpg.error.txt",
    ]


def test_a_failure_keeps_a_made_folder_that_another_job_writes_into(env: Env) -> None:
    first, second = env.drop("trip/a.jpg", b"photo a"), env.drop("trip/b.jpg", b"photo b")
    claimed = env.journal.claim_batch(2, "w0").jobs
    assert [j.id for j in claimed] == [first, second]
    a, b = (commit.file_job(env.journal, j, env.cfg) for j in (first, second))
    failed.fail(env.journal, first, "truncated JPEG", env.cfg, tmp=a.dst)
    assert (env.outbox / "trip").is_dir()  # empty for now, but b's result is about to land there
    b.dst.write_bytes(b"restored b")
    outcome = commit.commit(env.journal, second, FileResult(src=b.src, ok=True, dst=b.dst), env.cfg)
    assert outcome.output == env.outbox / "trip" / "b.jpg"
    assert env.files(env.outbox) == ["trip/b.jpg"]


def test_failed_file_goes_to_failed_with_its_reason(env: Env) -> None:
    job_id = env.drop("2024/bad.jpg", b"not really a jpeg")
    result = env.run_worker(job_id)
    outcome = failed.fail(env.journal, job_id, "truncated JPEG", env.cfg, tmp=result.dst)
    assert outcome is not None
    assert outcome.action == "set-aside"
    assert env.files(env.failed) == ["2024/bad.jpg", "2024/bad.jpg.error.txt"]
    assert env.files(env.inbox) == []
    assert env.files(env.outbox) == []
    text = (env.failed / "2024" / "bad.jpg.error.txt").read_text()
    assert "Reason:   truncated JPEG" in text
    assert f"Run:      {job_id}" in text
    assert "Attempts: 1" in text
    assert "When:" in text
    assert "moved here as bad.jpg" in text
    job = env.journal.get(job_id)
    assert job is not None
    assert job.state == "failed"
    assert job.original == "set-aside"
    assert failed.fail(env.journal, job_id, "again", env.cfg) is None  # already ended


def test_unsupported_file_and_name_collisions_in_failed(env: Env) -> None:
    (env.failed).mkdir(parents=True)
    (env.failed / "notes.txt").write_text("an earlier one")
    (env.failed / "notes (1).txt.error.txt").write_text("orphan error file holds this name")
    job_id = env.drop("notes.txt", b"hello")
    outcome = failed.fail(env.journal, job_id, "not an image (text file)", env.cfg, kind="unsupported")
    assert outcome is not None
    assert outcome.path == env.failed / "notes (2).txt"
    assert (env.failed / "notes (2).txt").read_bytes() == b"hello"
    text = (env.failed / "notes (2).txt.error.txt").read_text()
    assert "not a photo gpen-watch can read" in text
    assert "Kind:     unsupported" in text
    assert (env.failed / "notes.txt").read_text() == "an earlier one"


def _refusing_folder(monkeypatch: pytest.MonkeyPatch, code: int = errno.EROFS) -> list[Path]:
    """Every move into a folder fails with ``code`` (as a full or read-only folder would); returns
    the list of folders a move was tried into."""
    tried: list[Path] = []

    def refuse(src, directory, name, job_id, taken=None):  # type: ignore[no-untyped-def]
        tried.append(directory)
        raise OSError(code, os.strerror(code), str(src), None, str(directory / name))  # as os.link does

    monkeypatch.setattr(durable, "move_no_clobber", refuse)
    return tried


def test_failed_photo_waits_while_failed_folder_refuses_it_then_is_set_aside(env: Env, monkeypatch) -> None:
    job_id = env.drop("a.jpg")
    _refusing_folder(monkeypatch)
    outcome = failed.fail(env.journal, job_id, "truncated JPEG", env.cfg)
    assert outcome is not None
    assert outcome.action == Original.WAITING
    assert outcome.folder == env.failed
    assert outcome.detail == "Read-only file system"
    assert env.files(env.inbox) == ["a.jpg"]
    assert env.files(env.failed) == []  # no error file yet
    job = env.journal.get(job_id)
    assert job is not None
    assert job.state == "failed"
    assert job.original == "waiting"
    assert [e.kind for e in env.journal.history(job_id)].count("original-waiting") == 1
    # The rescan sees the file again: known, not a new job.
    st = (env.inbox / "a.jpg").stat()
    assert (
        env.journal.add(
            env.inbox / "a.jpg", env.inbox, "a.jpg", st.st_size, st.st_mtime, hash_file(env.inbox / "a.jpg")
        ).status
        == "known"
    )
    # Still refused: still waiting, and a failed retry adds nothing to the history.
    assert originals.retry_waiting(env.journal, env.cfg) == (
        0,
        [originals.Waiting(env.failed, "Read-only file system", 1)],
    )
    assert [e.kind for e in env.journal.history(job_id)].count("original-waiting") == 1
    # The folder works again (and the service restarted meanwhile): moved, with its error file.
    monkeypatch.undo()
    env.reopen()
    assert originals.retry_waiting(env.journal, env.cfg) == (1, [])
    assert env.files(env.inbox) == []
    assert env.files(env.failed) == ["a.jpg", "a.jpg.error.txt"]
    text = (env.failed / "a.jpg.error.txt").read_text()
    assert "Reason:   truncated JPEG" in text
    assert "moved here as a.jpg" in text
    assert env.journal.get(job_id).original == "set-aside"  # type: ignore[union-attr]
    assert env.journal.waiting_originals() == []


@pytest.mark.parametrize("code", sorted(FOLDER_REFUSES))
def test_archive_that_refuses_originals_keeps_them_waiting_then_takes_them(
    env: Env, monkeypatch, code: int
) -> None:
    (env.archive / "2024").mkdir(parents=True)
    (env.archive / "2024" / "a.jpg").write_bytes(b"an older original")
    a, b = env.drop("2024/a.jpg"), env.drop("b.jpg", b"bee")
    ra, rb = env.run_worker(a), env.run_worker(b, b"restored bee")
    tried = _refusing_folder(monkeypatch, code)
    out_a = commit.commit(env.journal, a, ra, env.cfg)
    out_b = commit.commit(env.journal, b, rb, env.cfg)
    # The results are safe in the outbox; the originals wait in the inbox.
    assert env.files(env.outbox) == ["2024/a.jpg", "b.jpg"]
    assert env.files(env.inbox) == ["2024/a.jpg", "b.jpg"]
    for out in (out_a, out_b):
        assert out.original is not None
        assert out.original.action == "waiting"
        assert out.original.folder == env.archive
        assert out.original.detail == os.strerror(code)
    assert [j.id for j in env.journal.waiting_originals()] == [a, b]
    assert env.journal.get(a).original_path == env.archive / "2024"  # type: ignore[union-attr]
    # One attempt per refusing folder and pass, however many wait for it.
    tried.clear()
    assert originals.retry_waiting(env.journal, env.cfg) == (
        0,
        [originals.Waiting(env.archive, os.strerror(code), 2)],
    )
    assert len(tried) == 1
    monkeypatch.undo()
    assert originals.retry_waiting(env.journal, env.cfg) == (2, [])
    assert env.files(env.inbox) == []
    assert env.files(env.archive) == ["2024/a (1).jpg", "2024/a.jpg", "b.jpg"]  # nothing overwritten
    assert (env.archive / "2024" / "a.jpg").read_bytes() == b"an older original"
    assert (env.archive / "2024" / "a (1).jpg").read_bytes() == b"original photo"
    assert env.files(env.outbox) == ["2024/a.jpg", "b.jpg"]  # not restored again
    assert env.journal.get(a).original_path == env.archive / "2024" / "a (1).jpg"  # type: ignore[union-attr]
    assert env.journal.get(b).original == "archived"  # type: ignore[union-attr]


def test_a_waiting_original_that_went_away_or_changed_is_not_waited_for(env: Env, monkeypatch) -> None:
    a, b, c = env.drop("a.jpg"), env.drop("b.jpg", b"bee"), env.drop("c.jpg", b"sea")
    results = {j: env.run_worker(j) for j in (a, b)}
    env.journal.claim_batch(1, "w0")
    env.journal.fail(c, "corrupt")
    _refusing_folder(monkeypatch, errno.ENOSPC)
    for j, r in results.items():
        commit.commit(env.journal, j, r, env.cfg)
    failed.set_aside(env.journal, c, env.cfg)
    assert len(env.journal.waiting_originals()) == 3
    monkeypatch.undo()
    (env.inbox / "a.jpg").unlink()
    (env.inbox / "b.jpg").write_bytes(b"a newer, longer photo")
    (env.inbox / "c.jpg").unlink()
    assert originals.retry_waiting(env.journal, env.cfg) == (3, [])
    assert [env.journal.get(j).original for j in (a, b, c)] == ["missing", "replaced", "missing"]  # type: ignore[union-attr]
    assert env.files(env.inbox) == ["b.jpg"]
    assert env.files(env.archive) == []
    assert "no longer in the inbox" in (env.failed / "c.jpg.error.txt").read_text()


def test_original_the_inbox_cannot_let_go_is_left_and_that_is_recorded(env: Env, monkeypatch) -> None:
    job_id = env.drop("a.jpg")
    source = env.inbox / "a.jpg"

    def read_only_inbox(src, *a, **kw):  # type: ignore[no-untyped-def]
        raise PermissionError(errno.EROFS, "Read-only file system", str(src))  # removing the inbox name

    monkeypatch.setattr(durable, "move_no_clobber", read_only_inbox)
    outcome = failed.fail(env.journal, job_id, "truncated JPEG", env.cfg)
    assert outcome is not None
    assert outcome.action == "left"
    assert "Read-only" in outcome.detail
    assert env.files(env.inbox) == ["a.jpg"]
    text = (env.failed / "a.jpg.error.txt").read_text()
    assert "left in the inbox" in text
    assert "Read-only" in text
    job = env.journal.get(job_id)
    assert job is not None
    assert job.original == "left"
    assert any(e.kind == "original-left" for e in env.journal.history(job_id))
    assert env.journal.waiting_originals() == []
    assert originals.retry_waiting(env.journal, env.cfg) == (0, [])
    # The rescan sees the file again: known, not retried forever.
    st = source.stat()
    assert (
        env.journal.add(source, env.inbox, "a.jpg", st.st_size, st.st_mtime, hash_file(source)).status
        == "known"
    )


def test_retry_reports_a_waiting_original_the_inbox_then_cannot_let_go(env: Env, monkeypatch) -> None:
    job_id = env.drop("a.jpg")
    _refusing_folder(monkeypatch)
    assert commit.commit(env.journal, job_id, env.run_worker(job_id), env.cfg).original.action == "waiting"  # type: ignore[union-attr]

    def read_only_inbox(src, *a, **kw):  # type: ignore[no-untyped-def]
        raise PermissionError(errno.EROFS, "Read-only file system", str(src))  # the archive works now

    monkeypatch.setattr(durable, "move_no_clobber", read_only_inbox)
    heard: list[moves.OriginalOutcome] = []
    assert originals.retry_waiting(env.journal, env.cfg, heard.append) == (1, [])
    assert [o.action for o in heard] == ["left"]
    assert env.journal.waiting_originals() == []


def test_recovery_reports_originals_the_inbox_cannot_let_go(env: Env, monkeypatch) -> None:
    job_id = env.drop("bad.jpg")
    env.journal.claim_batch(1, "w0")
    env.journal.fail(job_id, "corrupt")
    env.reopen()

    def read_only_inbox(src, *a, **kw):  # type: ignore[no-untyped-def]
        raise PermissionError(errno.EROFS, "Read-only file system", str(src))

    monkeypatch.setattr(durable, "move_no_clobber", read_only_inbox)
    report = recovery.recover(env.journal, env.cfg)
    assert report.originals == 1
    assert [o.action for o in report.left] == ["left"]
    assert "Read-only file system" in report.left[0].detail


def test_a_name_the_folder_cannot_hold_is_left_not_retried(env: Env, monkeypatch) -> None:
    job_id = env.drop("a.jpg")
    result = env.run_worker(job_id)
    _refusing_folder(monkeypatch, errno.ENAMETOOLONG)
    outcome = commit.commit(env.journal, job_id, result, env.cfg)
    assert outcome.original is not None
    assert outcome.original.action == "left"
    assert env.journal.waiting_originals() == []


def test_move_undoes_its_link_when_the_original_cannot_leave_the_inbox(tmp_path: Path, monkeypatch) -> None:
    inbox, archive = tmp_path / "inbox", tmp_path / "archive"
    inbox.mkdir()
    archive.mkdir()
    src = inbox / "a.jpg"
    src.write_bytes(b"photo")
    real_unlink = os.unlink

    def unlink(path, *a, **kw):  # type: ignore[no-untyped-def]
        if Path(path) == src:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_unlink(path, *a, **kw)

    monkeypatch.setattr(os, "unlink", unlink)
    with pytest.raises(PermissionError) as info:
        durable.move_no_clobber(src, archive, "a.jpg", 7)
    monkeypatch.undo()
    assert info.value.filename == str(src)
    assert info.value.filename2 is None  # the inbox's trouble
    assert src.read_bytes() == b"photo"
    assert list(archive.iterdir()) == []  # not under two names


def test_move_across_file_systems_leaves_no_partial_copy_in_a_full_folder(
    tmp_path: Path, monkeypatch
) -> None:
    inbox, archive = tmp_path / "inbox", tmp_path / "archive"
    inbox.mkdir()
    archive.mkdir()
    src = inbox / "a.jpg"
    src.write_bytes(b"photo" * 1000)
    real_place, real_copy2 = durable.place, durable.shutil.copy2

    def place(s, directory, name, **kw):  # type: ignore[no-untyped-def]
        if Path(s) == src:
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(s))
        return real_place(s, directory, name, **kw)

    def copy2(s, d):  # type: ignore[no-untyped-def]
        Path(d).write_bytes(b"pho")  # the disk filled up part way
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(durable, "place", place)
    monkeypatch.setattr(durable.shutil, "copy2", copy2)
    with pytest.raises(OSError, match="No space"):
        durable.move_no_clobber(src, archive, "a.jpg", 7)
    assert list(archive.iterdir()) == []
    assert src.read_bytes() == b"photo" * 1000
    monkeypatch.setattr(durable.shutil, "copy2", real_copy2)  # room again
    assert durable.move_no_clobber(src, archive, "a.jpg", 7) == archive / "a.jpg"
    assert not src.exists()
    assert [p.name for p in archive.iterdir()] == ["a.jpg"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_inbox_for_real(env: Env) -> None:
    job_id = env.drop("a.jpg")
    env.inbox.chmod(0o555)
    try:
        outcome = failed.fail(env.journal, job_id, "truncated JPEG", env.cfg)
    finally:
        env.inbox.chmod(0o755)
    assert outcome is not None
    assert outcome.action == "left"
    assert env.files(env.inbox) == ["a.jpg"]


def test_vanished_original_still_gets_an_error_file(env: Env) -> None:
    job_id = env.drop("a.jpg")
    (env.inbox / "a.jpg").unlink()
    outcome = failed.fail(env.journal, job_id, "could not read", env.cfg)
    assert outcome is not None
    assert outcome.action == "missing"
    assert "no longer in the inbox" in (env.failed / "a.jpg.error.txt").read_text()


def test_crash_after_fail_before_set_aside_is_finished_by_recovery(env: Env) -> None:
    job_id = env.drop("sub/bad.jpg")
    env.journal.claim_batch(1, "w0")
    env.journal.fail(job_id, "decompression bomb")
    env.reopen()
    assert recovery.recover(env.journal, env.cfg).originals == 1
    assert env.files(env.failed) == ["sub/bad.jpg", "sub/bad.jpg.error.txt"]
    assert env.journal.get(job_id).original == "set-aside"  # type: ignore[union-attr]


def test_crash_mid_set_aside_after_the_move(env: Env) -> None:
    job_id = env.drop("bad.jpg")
    env.journal.claim_batch(1, "w0")
    env.journal.fail(job_id, "corrupt")
    env.failed.mkdir(parents=True)
    env.journal.set_original(job_id, "setting-aside", env.failed / "bad.jpg")
    os.rename(env.inbox / "bad.jpg", env.failed / "bad.jpg")  # moved; error file not yet written
    env.reopen()
    recovery.recover(env.journal, env.cfg)
    assert env.files(env.failed) == ["bad.jpg", "bad.jpg.error.txt"]
    assert env.journal.get(job_id).original == "set-aside"  # type: ignore[union-attr]


def _copy_claim(env: Env, rel: str, content: bytes = b"original photo") -> Twin:
    job_id = env.drop(rel, content)
    batch = env.journal.claim_batch(4, "pool")
    assert [t.job.id for t in batch.copies] == [job_id]
    return batch.copies[0]


def test_a_duplicate_gets_a_copy_of_the_first_result_under_its_own_name_and_is_archived(env: Env) -> None:
    first = env.drop("a.jpg")
    commit.commit(env.journal, first, env.run_worker(first), env.cfg)
    twin = _copy_claim(env, "sub/copy.jpg")
    outcome = duplicates.copy_result(env.journal, twin, env.cfg)
    assert outcome.output == env.outbox / "sub" / "copy.jpg"
    assert outcome.original is not None
    assert outcome.original.action == "archived"
    assert env.files(env.outbox) == ["a.jpg", "sub/copy.jpg"]
    assert (env.outbox / "sub" / "copy.jpg").read_bytes() == (env.outbox / "a.jpg").read_bytes()
    # A copy, not a second name of the same file: editing one output leaves the other alone.
    assert not os.path.samefile(env.outbox / "sub" / "copy.jpg", env.outbox / "a.jpg")
    assert env.files(env.archive) == ["a.jpg", "sub/copy.jpg"]
    job = env.journal.require(twin.job.id)
    assert (job.state, job.duplicate_of, job.faces) == ("duplicate", first, 2)
    assert job.notes[0] == f"same content as {env.inbox / 'a.jpg'}: a copy of its result a.jpg"


def test_a_duplicate_takes_the_extension_of_what_the_first_output_is(env: Env) -> None:
    first = env.drop("a.png")
    res = env.run_worker(first)
    commit.commit(env.journal, first, FileResult(**{**res.__dict__, "format": "JPEG"}), env.cfg)
    assert env.files(env.outbox) == ["a.jpg"]
    twin = _copy_claim(env, "b.png")
    assert duplicates.copy_result(env.journal, twin, env.cfg).output == env.outbox / "b.jpg"


def test_a_duplicate_whose_first_result_was_edited_or_removed_is_not_a_copy_of_it(env: Env) -> None:
    first = env.drop("a.jpg")
    commit.commit(env.journal, first, env.run_worker(first), env.cfg)
    (env.outbox / "a.jpg").write_bytes(b"retouched by the user, longer than before")
    twin = _copy_claim(env, "b.jpg")
    with pytest.raises(duplicates.FirstResultGone, match="replaced or changed"):
        duplicates.copy_result(env.journal, twin, env.cfg)
    (env.outbox / "a.jpg").unlink()
    with pytest.raises(duplicates.FirstResultGone):
        duplicates.copy_result(env.journal, twin, env.cfg)
    assert env.files(env.outbox) == []  # no temp copy left behind


def test_the_same_name_dropped_again_gets_no_second_file(env: Env) -> None:
    first = env.drop("a.jpg")
    commit.commit(env.journal, first, env.run_worker(first), env.cfg)
    twin = _copy_claim(env, "a.jpg")
    outcome = duplicates.copy_result(env.journal, twin, env.cfg)
    assert outcome.output == env.outbox / "a.jpg"
    assert env.files(env.outbox) == ["a.jpg"]
    assert env.journal.require(twin.job.id).state == "duplicate"
    assert env.files(env.archive) == ["a (1).jpg", "a.jpg"]


def test_a_copy_killed_after_its_commit_token_is_finished_as_a_duplicate_by_recovery(env: Env) -> None:
    first = env.drop("a.jpg")
    commit.commit(env.journal, first, env.run_worker(first), env.cfg)
    twin = _copy_claim(env, "b.jpg")
    # As if killed right after the token was recorded, before the link: only the temp copy exists.
    final, tmp = commit.prepare(env.journal, twin.job.id, env.cfg)
    shutil.copyfile(env.outbox / "a.jpg", tmp)
    st = tmp.stat()
    assert env.journal.begin_commit(twin.job.id, final, st.st_ino, st.st_size, 2)
    env.reopen()
    rec = recovery.recover(env.journal, env.cfg)
    assert rec.finished == [twin.job.id]
    assert env.journal.require(twin.job.id).state == "duplicate"
    assert env.files(env.outbox) == ["a.jpg", "b.jpg"]


def test_a_twin_of_a_failed_photo_repeats_its_reason_in_its_own_error_file(env: Env) -> None:
    first = env.drop("bad.jpg", b"broken")
    twin_id = env.drop("bad-copy.jpg", b"broken")
    env.journal.claim_batch(4, "pool")
    failed.fail(env.journal, first, "truncated JPEG: image data ends early", env.cfg)
    (twin,) = env.journal.claim_batch(4, "pool").repeats
    assert twin.job.id == twin_id
    duplicates.repeat_failure(env.journal, twin, env.cfg)
    job = env.journal.require(twin_id)
    assert (job.state, job.duplicate_of) == ("failed", first)
    text = (env.failed / "bad-copy.jpg.error.txt").read_text()
    assert "Reason:   truncated JPEG: image data ends early (same content as" in text
    assert env.files(env.failed) == ["bad-copy.jpg", "bad-copy.jpg.error.txt", "bad.jpg", "bad.jpg.error.txt"]


def test_stale_temps_are_cleaned_but_not_those_of_running_jobs(env: Env) -> None:
    running = env.drop("a.jpg")
    env.run_worker(running)  # its temp file is live
    (env.outbox / "sub").mkdir()
    stale = env.outbox / "sub" / ".old.jpg.gpen-tmp-999"
    stale.write_bytes(b"x")
    keep = env.outbox / "sub" / ".hidden-user-file"
    keep.write_bytes(b"y")
    assert recovery.clean_stale_temps(env.journal, env.cfg) == 1
    assert not stale.exists()
    assert keep.exists()
    assert (env.outbox / f".a.jpg.gpen-tmp-{running}").exists()


def test_parent_side_modules_do_not_import_torch() -> None:
    code = (
        "import gpen_watch.journal, gpen_watch.watch.watcher, gpen_watch.outbox.commit, gpen_watch.outbox.failed\n"
        "gpen_watch.watch.filters.supported_extensions()\n"
    )
    imported = heavy_modules_after(code, ("torch", "cv2", "numpy"))
    assert "torch" not in imported, imported


_CRASHING_SET_ASIDE = _CRASH_AT_STEP + textwrap.dedent(
    """
    from gpen_watch.journal.states import JobState
    from gpen_watch.outbox import failed

    for name in ("fsync_file", "fsync_dir", "write_text_durably"):
        setattr(durable, name, crashing(getattr(durable, name)))
    for name in ("fail", "set_original"):
        setattr(Journal, name, crashing(getattr(Journal, name)))

    cfg = Config(watch=WatchConfig(inboxes=[InboxConfig(Path(args["inbox"]))], outbox=Path(args["outbox"])))
    j = Journal.open(args["journal"])
    failed.fail(j, args["job"], "not a photo: a text file", cfg, kind=JobState.UNSUPPORTED)
    print("completed", calls, flush=True)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_at_every_step_of_setting_a_failure_aside_leaves_it_with_its_error_file(
    tmp_path: Path,
) -> None:
    """A real process is killed before each step of ending a job as unsupported in turn; after the
    restart's recovery the original is in failed/ once, with its error file beside it."""
    kill_at = 1
    while True:
        e = Env(tmp_path / f"k{kill_at}")
        job_id = e.drop("sub/notes.txt", b"a note")
        assert [j.id for j in e.journal.claim_batch(1, "w0").jobs] == [job_id]
        e.journal.close()
        args = {
            "kill_at": kill_at,
            "inbox": str(e.inbox),
            "outbox": str(e.outbox),
            "journal": str(e.root / "state" / "journal.sqlite3"),
            "job": job_id,
        }
        proc = subprocess.run(
            [sys.executable, "-c", _CRASHING_SET_ASIDE, json.dumps(args)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=60,
        )
        completed = proc.returncode == 0
        assert completed or proc.returncode == -signal.SIGKILL, proc.stderr
        e.journal = Journal.open(e.root / "state" / "journal.sqlite3")
        recovery.recover(e.journal, e.cfg)
        if e.journal.require(job_id).state == JobState.QUEUED:  # killed before the journal knew
            assert [j.id for j in e.journal.claim_batch(1, "w0").jobs] == [job_id]
            failed.fail(e.journal, job_id, "not a photo: a text file", e.cfg, kind=JobState.UNSUPPORTED)
        job = e.journal.require(job_id)
        assert (job.state, job.original) == (JobState.UNSUPPORTED, "set-aside"), f"killed at step {kill_at}"
        assert e.files(e.failed) == ["sub/notes.txt", "sub/notes.txt.error.txt"], f"killed at step {kill_at}"
        assert "Reason:   not a photo: a text file" in (e.failed / "sub" / "notes.txt.error.txt").read_text()
        assert e.files(e.inbox) == []
        e.journal.close()
        if completed:
            break
        kill_at += 1
    assert kill_at > 5  # every step was interrupted once
