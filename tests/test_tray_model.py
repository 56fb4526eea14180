"""The tray's icon and menu model as plain data: state, badge, title, menu entries, notices, pixels."""

from __future__ import annotations

from typing import Any

import pytest
from PIL import Image

from gpen_watch.gpu.nvml import GpuSample
from gpen_watch.service.status import Status
from gpen_watch.tray import icon, model
from gpen_watch.tray.notices import NoticeTracker, batch_message, problem_kind


def status(
    queued: int = 0,
    running: int = 0,
    *,
    paused: bool = False,
    problem: str | None = None,
    images: int = 0,
    failed: int = 0,
    devices: tuple[str, ...] = ("cpu",),
    **extra: Any,
) -> Status:
    return Status.from_json(
        {
            "ok": True,
            "paused": paused,
            "stopping": False,
            "problem": problem,
            # As the service sends it: each problem on its own too.
            "problems": [{"about": "", "text": problem}] if problem else [],
            "queue": {
                "queued": queued,
                "running": running,
                "done": images,
                "failed": failed,
                "in_flight": running,
            },
            "throughput": {"images": images, "faces": images, "failed": failed},
            "workers": [{"name": d, "device": d, "state": "idle"} for d in devices],
            **extra,
        }
    )


H200 = GpuSample(0, "NVIDIA H200", 87, int(12.3 * 2**30), int(139.8 * 2**30), 64)


@pytest.mark.parametrize(
    "st, state",
    [
        (status(), "idle"),
        (status(queued=3), "working"),
        (status(running=1), "working"),
        (status(queued=3, paused=True), "paused"),
        (status(paused=True), "paused"),
        (
            status(queued=2, problem="outbox: [Errno 28] No space left on device; retrying every 30 s"),
            "error",
        ),
        (status(paused=True, problem="cpu#0: GPEN-BFR-512: weights not found"), "error"),
        (status(stopping=True), "stopping"),
        (None, "starting"),
    ],
)
def test_state_from_status(st: dict[str, Any] | None, state: str) -> None:
    assert model.view_from_status(st).state == state


def test_queue_depth_counts_waiting_and_running() -> None:
    view = model.view_from_status(status(queued=5, running=2))
    assert view.queue_depth == 7
    assert model.badge(view) == model.Badge("7", *model.BADGE_COLOURS["working"])


@pytest.mark.parametrize(
    "depth, text", [(0, ""), (1, "1"), (9, "9"), (42, "42"), (99, "99"), (100, "99+"), (12345, "99+")]
)
def test_badge_text(depth: int, text: str) -> None:
    assert model.badge_text(depth) == text


def test_each_state_has_its_own_colour() -> None:
    fills = {model.BADGE_COLOURS[s][0] for s in ("idle", "working", "paused", "error")}
    assert len(fills) == 4


def test_icon_key_changes_only_with_state_or_badge() -> None:
    a = model.view_from_status(status(queued=3, images=1), [H200])
    b = model.view_from_status(status(queued=3, images=2), [GpuSample(0, "NVIDIA H200", 12, 1, 2, 40)])
    assert model.icon_key(a) == model.icon_key(b) == ("working", "3")
    assert model.icon_key(model.view_from_status(status(queued=4))) == ("working", "4")
    assert model.icon_key(model.view_from_status(status(queued=3, paused=True))) == ("paused", "3")
    # Past 99 the badge stays "99+": no redraw for every file of a big drop.
    assert model.icon_key(model.view_from_status(status(queued=150))) == model.icon_key(
        model.view_from_status(status(queued=151))
    )


def test_title_says_state_and_depth_and_fits_a_windows_tooltip() -> None:
    assert model.title(model.view_from_status(status())) == "gpen-watch: idle: queue empty"
    assert model.title(model.view_from_status(status(queued=12))) == "gpen-watch: working: 12 in the queue"
    assert (
        model.title(model.view_from_status(status(queued=2, paused=True)))
        == "gpen-watch: paused: 2 in the queue"
    )
    assert model.title(model.view_from_status(None)) == "gpen-watch: starting"
    long = model.title(model.view_from_status(status(problem="outbox: " + "x" * 200)))
    assert long.startswith("gpen-watch: needs attention - outbox: ")
    assert len(long) <= model.MAX_TITLE


def texts(entries: list[model.Entry]) -> list[str]:
    return ["---" if e.separator else e.text for e in entries]


def test_menu_with_a_gpu() -> None:
    view = model.view_from_status(
        status(queued=3, devices=("cuda:0 (NVIDIA H200)",), restored_today=17), [H200], login_enabled=True
    )
    entries = model.menu(view)
    assert texts(entries) == [
        "Working: 3 in the queue",
        "Restored today: 17",
        "NVIDIA H200: 87%, 12.3/139.8 GiB, 64 °C",
        "---",
        "Pause",
        "---",
        "Open inbox",
        "Open outbox",
        "Open failed folder",
        "Open log",
        "---",
        "Start at login",
        "Quit",
    ]
    by_text = {e.text: e for e in entries}
    assert all(by_text[t].action is None for t in texts(entries)[:3])  # information only
    assert by_text["NVIDIA H200: 87%, 12.3/139.8 GiB, 64 °C"].live
    assert by_text["Pause"].checked is False
    assert by_text["Pause"].action == "toggle_pause"
    assert by_text["Start at login"].checked is True
    assert by_text["Quit"].action == "quit"
    # With a menu a plain click opens the outbox (Windows, GTK); the menu does the rest.
    assert [e.text for e in entries if e.default] == ["Open outbox"]


def test_restored_today_counts_photos_with_faces_and_those_without_apart() -> None:
    view = model.view_from_status(status(done_today=9, restored_today=6, no_face_today=3))
    assert view.done == 6
    assert view.no_face == 3
    assert "Restored today: 6; 3 without a face" in texts(model.menu(view))
    # None without a face today: the line stays short.
    view = model.view_from_status(status(done_today=6, restored_today=6, no_face_today=0))
    assert "Restored today: 6" in texts(model.menu(view))


def test_menu_in_cpu_mode_paused_with_a_problem() -> None:
    view = model.view_from_status(
        status(queued=2, paused=True, problem="outbox: read-only file system", log_file="/l/gpen-watch.log")
    )
    lines = texts(model.menu(view))
    assert lines[:4] == [
        "Needs attention: 2 in the queue",
        "outbox: read-only file system",  # the whole of it: no "see ..." after it
        "Restored today: 0",
        "CPU mode (no NVIDIA GPU)",
    ]
    assert next(e for e in model.menu(view) if e.text == "Pause").checked is True


def test_a_notice_is_a_menu_line_and_in_the_title_but_not_an_error() -> None:
    """Originals a read-only inbox keeps: their results are out, so the icon stays green."""
    note = "3 original(s) left in the inbox: inbox is read-only"
    view = model.view_from_status(status(images=3, restored_today=3, notice=note))
    assert view.state == "idle"
    assert model.badge(view).fill == model.BADGE_COLOURS["idle"][0]
    lines = texts(model.menu(view))
    assert lines[:3] == [
        "Idle: queue empty",
        "Note: 3 original(s) left in the inbox: inbox is…",
        "Restored today: 3",
    ]
    assert model.title(view).startswith("gpen-watch: idle: queue empty - note: 3 original(s)")
    assert len(model.title(view)) <= model.MAX_TITLE
    # A problem outranks it in the title; the menu keeps both.
    both = model.view_from_status(
        status(problem="outbox: read-only file system", notice=note, dashboard="http://127.0.0.1:4736/")
    )
    assert "note" not in model.title(both)
    assert [t for t in texts(model.menu(both)) if t.startswith(("outbox", "Note:"))] == [
        "outbox: read-only file system",
        "Note: 3 original(s) left in the inbox: inbox is…",
    ]
    # No problem notification for it: only the batch that just finished is announced.
    assert [n.title for n in NoticeTracker().update(view)] == ["gpen-watch: batch finished"]


def test_cpu_mode_when_every_worker_runs_on_the_cpu_even_with_a_gpu() -> None:
    view = model.view_from_status(status(devices=("cpu",)), [H200])
    assert view.cpu_mode
    assert model.device_lines(view) == ["CPU mode"]


def test_gpu_line_leaves_out_what_the_gpu_does_not_report() -> None:
    assert model.gpu_line(GpuSample(1, "Tesla T4", None, 2**30, 16 * 2**30, None)) == "Tesla T4: 1.0/16.0 GiB"
    assert model.gpu_line(GpuSample(1, "Tesla T4")) == "Tesla T4: no readings"


def test_without_a_menu_a_click_toggles_pause() -> None:
    entries = model.menu(model.view_from_status(status()), has_menu=False)
    assert [e.action for e in entries if e.default] == ["toggle_pause"]


def test_several_inboxes_get_one_item_each() -> None:
    entries = model.menu(model.view_from_status(status()), inbox_names=["scans", "phone"])
    assert [(e.text, e.action) for e in entries if (e.action or "").startswith("open_inbox")] == [
        ("Open inbox: scans", "open_inbox:0"),
        ("Open inbox: phone", "open_inbox:1"),
    ]


# --- notices ------------------------------------------------------------------------------------


def test_batch_finished_notice_counts_only_that_batch() -> None:
    t = NoticeTracker()
    assert t.update(model.view_from_status(None)) == []  # starting
    assert t.update(model.view_from_status(status())) == []  # nothing done yet
    assert t.update(model.view_from_status(status(queued=3, running=1, images=6))) == []
    (notice,) = t.update(model.view_from_status(status(images=10, failed=1)))
    assert notice.message == "10 photos restored, 1 failed (see the failed folder)"
    assert t.update(model.view_from_status(status(queued=4, images=10, failed=1))) == []
    assert t.update(model.view_from_status(status(queued=1, running=1, images=12, failed=1))) == []
    (notice,) = t.update(model.view_from_status(status(images=13, failed=2)))
    assert notice.message == "3 photos restored, 1 failed (see the failed folder)"
    assert t.update(model.view_from_status(status(images=13, failed=2))) == []  # said once


def test_a_batch_between_two_polls_is_still_announced() -> None:
    t = NoticeTracker()
    t.update(model.view_from_status(status()))
    (notice,) = t.update(model.view_from_status(status(images=2)))
    assert notice.message == "2 photos restored"


def test_no_batch_notice_while_paused_with_work_waiting() -> None:
    t = NoticeTracker()
    t.update(model.view_from_status(status()))
    assert t.update(model.view_from_status(status(queued=3, paused=True))) == []
    assert t.update(model.view_from_status(status(queued=3, paused=True))) == []
    (notice,) = t.update(model.view_from_status(status(images=3)))
    assert notice.message == "3 photos restored"


def test_problem_notice_once_per_problem() -> None:
    t = NoticeTracker()
    weights = "cpu#0: GPEN-BFR-512: weights not found in /nowhere; run `gpen-watch models fetch`"
    (n,) = t.update(model.view_from_status(status(problem=weights, log_file="/l/gpen-watch.log")))
    assert n.title == "gpen-watch: model weights missing"
    # One line, up to its "; ", and where the rest is read.
    assert n.message == "cpu#0: GPEN-BFR-512: weights not found in /nowhere (see the log)"
    assert t.update(model.view_from_status(status(problem=weights))) == []
    assert t.update(model.view_from_status(status())) == []
    (n,) = t.update(model.view_from_status(status(problem="outbox: [Errno 30] Read-only file system")))
    assert n.title == "gpen-watch: cannot write to the outbox"
    originals = "cannot move originals to /p/failed: No space left on device; 1 left in the inbox; retrying every 30 s"
    (n,) = t.update(model.view_from_status(status(problem=originals, dashboard="http://127.0.0.1:4736/")))
    assert n.title == "gpen-watch: originals waiting to be moved"
    assert n.message == "cannot move originals to /p/failed: No space left on device (see the dashboard)"
    assert t.update(model.view_from_status(status(problem=originals.replace("1 left", "2 left")))) == []


def test_a_damaged_weights_file_is_announced_as_damaged_not_missing() -> None:
    t = NoticeTracker()
    corrupt = (
        "corrupt model file: GPEN-BFR-512\n"
        "  /m/GPEN-BFR-512.pth (GPEN-BFR-512): truncated (not a complete zip archive)\n"
        "  replace it: delete it and run\n    gpen-watch models fetch GPEN-BFR-512\n"
    )
    (n,) = t.update(model.view_from_status(status(problem=corrupt, dashboard="http://127.0.0.1:4736/")))
    assert n.title == "gpen-watch: model weights damaged or the wrong file"
    assert n.message == "corrupt model file: GPEN-BFR-512 (see the dashboard)"


def test_problem_kinds_and_batch_message() -> None:
    assert problem_kind(None) is None
    assert problem_kind("outbox: disk full") == "outbox"
    away = "outbox /mnt/nas/out is away: the drive or share holding it is not mounted; 3 photo(s) wait"
    assert problem_kind(away) == "away"
    assert problem_kind("cuda:0: model file is corrupt") == "corrupt"
    assert problem_kind("cpu#0: /m/GPEN-BFR-512.pth does not match GPEN-BFR-512: key x") == "corrupt"
    assert problem_kind("cpu#0: GPEN-BFR-512: weights not found in /m") == "weights"
    assert problem_kind("cuda:0: CUDA error: no CUDA-capable device") == "other"
    originals = "cannot move originals to /p/originals: Read-only file system; 2 left in the inbox; retrying every 30 s"
    assert problem_kind(originals) == "originals"
    # With another problem before it, that one names the notice.
    assert problem_kind("outbox: disk full; " + originals) == "outbox"
    assert problem_kind("cpu#0: model file is corrupt; " + originals) == "corrupt"
    assert batch_message(1, 0) == "1 photo restored"


# --- pixels -------------------------------------------------------------------------------------


def _near(rgb: tuple[int, ...], hex_colour: str, tol: int = 12) -> bool:
    want = tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return all(abs(a - b) <= tol for a, b in zip(rgb, want))


def count_colour(image: Image.Image, hex_colour: str, box: tuple[int, int, int, int] | None = None) -> int:
    region = image.convert("RGB").crop(box) if box else image.convert("RGB")
    data = region.tobytes()
    return sum(1 for px in zip(data[0::3], data[1::3], data[2::3]) if _near(px, hex_colour))


@pytest.mark.parametrize("state", ["idle", "working", "paused", "error"])
def test_icon_badge_has_the_state_colour_in_the_lower_right(state: str) -> None:
    base = icon.load_base()
    view = model.TrayView(state, 5)  # type: ignore[arg-type]
    image = icon.render(base, model.badge(view))
    assert image.size == (icon.SIZE, icon.SIZE)
    assert image.mode == "RGBA"
    fill = model.BADGE_COLOURS[state][0]  # type: ignore[index]
    half = icon.SIZE // 2
    assert count_colour(image, fill, (half, half, icon.SIZE, icon.SIZE)) > 150
    assert count_colour(image, fill, (0, 0, half // 2, half // 2)) == 0  # the face is left alone
    assert count_colour(base, fill) < 10


def test_icon_numbers_differ_and_99_plus_fits() -> None:
    base = icon.load_base()
    a = icon.render(base, model.Badge("3", "#1565c0", "#ffffff"))
    b = icon.render(base, model.Badge("12", "#1565c0", "#ffffff"))
    c = icon.render(base, model.Badge("99+", "#1565c0", "#ffffff"))
    assert a.tobytes() != b.tobytes() != c.tobytes()
    # The pill is as wide as the icon at most, and its ink is inside it.
    assert count_colour(c, "#ffffff", (icon.SIZE // 2, icon.SIZE // 2, icon.SIZE, icon.SIZE)) > 40


def test_a_worker_on_apples_gpu_is_shown_by_name_not_as_cpu_mode() -> None:
    view = model.view_from_status(status(devices=("Apple GPU (mps)",)), [])  # NVML sees no GPU on a Mac
    assert not view.cpu_mode
    assert model.device_lines(view) == ["Apple GPU (mps)"]
    assert model.device_lines(model.view_from_status(status(devices=("cpu",)), [])) == [
        "CPU mode (no NVIDIA GPU)"
    ]


def test_cluster_nodes_are_listed_with_their_gpus_under_their_host() -> None:
    rtx = {"index": 0, "name": "NVIDIA RTX 4090", "util_percent": 87, "mem_used": 3 * 2**30,
           "mem_total": 24 * 2**30, "temp_c": 66}  # fmt: skip
    st = status(
        queued=2,
        devices=("cpu",),
        nodes=[
            {"name": "studio-a", "local": True, "up": True, "workers": 1, "done": 4},
            {"name": "studio-b (192.168.1.12)", "up": True, "workers": 1, "done": 3, "in_flight": 1,
             "gpus": [rtx, {**rtx, "index": 1, "util_percent": 5}]},
            {"name": "studio-c (192.168.1.13)", "up": False, "workers": 1, "done": 2},
            {"name": "studio-d (192.168.1.14)", "up": True, "workers": 1, "cpu_only": True},
        ],
    )  # fmt: skip
    entries = model.menu(model.view_from_status(st, []))
    texts = [e.text for e in entries]
    i = texts.index("studio-b (192.168.1.12): 3 done, 1 in flight")
    assert texts[i - 1] == "CPU mode (no NVIDIA GPU)"  # this machine's line stays first
    assert texts[i + 1 : i + 6] == [
        "    NVIDIA RTX 4090: 87%, 3.0/24.0 GiB, 66 °C",
        "    NVIDIA RTX 4090: 5%, 3.0/24.0 GiB, 66 °C",
        "studio-c (192.168.1.13): away, 2 done",  # away: what it has is not known now
        "studio-d (192.168.1.14): 0 done, 0 in flight",
        "    CPU",
    ]
    # The readings change every heartbeat; the node's counts are part of the menu proper.
    assert [e.live for e in entries[i : i + 3]] == [False, True, True]
    assert all(len(t) <= model.MAX_LINE for t in texts)


def test_the_menu_opens_the_dashboard_when_the_service_serves_one() -> None:
    served = model.menu(model.view_from_status(status(dashboard="http://127.0.0.1:4736/"), []))
    entry = next(e for e in served if e.text == "Open dashboard")
    assert entry.action == "open_dashboard"
    assert texts(served).index("Open dashboard") == texts(served).index("Pause") + 1
    assert "Open dashboard" not in texts(model.menu(model.view_from_status(status(), [])))


def test_workers_waiting_for_their_model_files_say_so_not_working() -> None:
    """A download under way holds the workers: no problem yet, and no photo is being worked on."""
    downloading = status(queued=2, models={"state": "waiting", "files": []})
    view = model.view_from_status(downloading)
    assert view.state == "waiting"
    assert model.title(view) == "gpen-watch: waiting for model files: 2 in the queue"
    assert model.menu(view)[0].text == "Waiting for model files: 2 in the queue"
    # Once a download failed it is a problem, which says what to do: the problem wins.
    failed = status(queued=2, problem="model files missing", models={"state": "waiting", "files": []})
    assert model.view_from_status(failed).state == "error"
    # The files are there: the workers run.
    assert model.view_from_status(status(queued=2, models={"state": "ready"})).state == "working"


def test_a_batch_and_the_photo_being_restored_show_in_the_tooltip_and_the_menu() -> None:
    """`status` says "solvay.jpg: restoring faces 7 of 29": the tray says it too, with the batch."""
    solvay = {"job_id": 7, "name": "solvay.jpg", "stage": "restoring", "done": 7, "total": 29}
    ahead = {"job_id": 8, "name": "next.jpg", "stage": "waiting"}
    workers = [{"name": "cpu#0", "device": "cpu", "state": "busy", "photos": [solvay, ahead]}]
    one = model.view_from_status(status(running=1, workers=workers, batch={"total": 1, "ended": 0}))
    assert model.title(one) == "gpen-watch: working: 1 in the queue - faces 7 of 29"
    lines = [e.text for e in model.menu(one)]
    assert lines[:2] == ["Working: 1 in the queue", "solvay.jpg: restoring faces 7 of 29"]
    assert not any("next.jpg" in line for line in lines)  # waiting its turn in the worker
    assert [e.live for e in model.menu(one)[:2]] == [False, True]  # rebuilt as seldom as GPU lines

    batch = model.view_from_status(
        status(queued=8, running=1, workers=workers, batch={"total": 12, "ended": 3})
    )
    assert model.title(batch) == "gpen-watch: working: 3 of 12 photos, faces 7 of 29"
    assert [e.text for e in model.menu(batch)][:3] == [
        "Working: 9 in the queue",
        "Batch: 3 of 12 photos",
        "solvay.jpg: restoring faces 7 of 29",
    ]
    # Many photos in hand (a GPU worker): a few lines, then how many more.
    many = [{**solvay, "job_id": n, "name": f"p{n}.jpg"} for n in range(5)]
    busy = [{"name": "cuda:0", "device": "cuda:0", "state": "busy", "photos": many}]
    lines = [e.text for e in model.menu(model.view_from_status(status(running=5, workers=busy)))]
    assert "p2.jpg: restoring faces 7 of 29" in lines and "p3.jpg: restoring faces 7 of 29" not in lines
    assert "and 2 more photos in hand" in lines
    # A problem still comes first in the tooltip; idle says nothing of a batch.
    assert model.title(
        model.view_from_status(status(running=1, workers=workers, problem="outbox full"))
    ).endswith("- outbox full")
    assert model.view_from_status(status()).batch == (0, 0)


def test_the_problem_line_opens_where_the_problem_is_said_in_full() -> None:
    view = model.view_from_status(status(problem="model files missing: no internet connection"))
    (line,) = [e for e in model.menu(view) if e.text.startswith("model files missing")]
    assert line.action == "open_problem"
    assert line.text == "model files missing: no internet connection"
    assert len(line.text) <= model.MAX_LINE


def test_a_batch_not_started_yet_is_said_by_the_queue() -> None:
    paused = model.view_from_status(status(queued=3, paused=True, batch={"total": 3, "ended": 0}))
    assert model.title(paused) == "gpen-watch: paused: 3 in the queue"
    assert not any(e.text.startswith("Batch:") for e in model.menu(paused))
    later = model.view_from_status(status(queued=2, paused=True, batch={"total": 3, "ended": 1}))
    assert model.title(later) == "gpen-watch: paused: 1 of 3 photos"
