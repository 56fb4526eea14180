"""A frame or picture inside a file is held to what its file can hold, as the file's own size is
(gpen_watch/imaging/claims.py): a GIF frame that grows Pillow's canvas, the picture inside a
Windows (ICO) or Mac OS (ICNS) icon. Such a file is damaged whatever restore.max_megapixels says,
under an address-space cap too; the advice to raise the limit is given only where it would work,
and it names the limit the user set, for a file named on the command line too. Every file is
built here (Pillow's decompression_bomb.gif, decompression_bomb.ico and oom-8ed3316a...icns are
rebuilt by tests/claimed_sizes.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from claimed_sizes import gif_comment, gif_frame, icns_claiming, ico_claiming
from PIL import Image

from gpen_watch.config.schema import RestoreConfig
from gpen_watch.imaging.errors import BrokenImageError, ImageTooLargeError
from gpen_watch.imaging.load import header_refusal, load_image, probe_image
from gpen_watch.restore.api import FileJob
from gpen_watch.restore.stages.decode_stage import photo_cost

# name: (the file, how its reason starts)
IMPOSSIBLE: dict[str, tuple[Callable[[], bytes], str]] = {
    "bomb.gif": (lambda: gif_frame(0, 65280, 65535, 1321), "damaged GIF: "),
    "bomb.ico": (
        lambda: ico_claiming(65535, 65535),
        "damaged ICO: the picture inside it declares 65535x32767 (2147 MP), more than a file of "
        "198 bytes can hold (1,024 pixels at most)",
    ),
    "oom.icns": (
        lambda: icns_claiming(1_014_197_964),
        "damaged ICNS: its 256x256 icon holds a picture that declares 256x1014197964 (259635 MP), "
        "larger than the icon it is stored as",
    ),
}


def _write_impossible(folder: Path) -> list[Path]:
    for name, (make, _start) in IMPOSSIBLE.items():
        (folder / name).write_bytes(make())
    return [folder / name for name in IMPOSSIBLE]


@pytest.mark.parametrize("limit", [200.0, 1e8, 0.0])  # the default, raised, none
def test_a_frame_its_file_cannot_hold_is_damaged_whatever_the_limit(tmp_path: Path, limit: float) -> None:
    for src in _write_impossible(tmp_path):
        with pytest.raises(BrokenImageError) as err:
            load_image(src, max_megapixels=limit)
        reason = err.value.reason
        assert reason.startswith(IMPOSSIBLE[src.name][1]), reason
        assert reason.endswith("and no limit would let it be restored; copy it again from the original")
        assert "max_megapixels" not in reason
        # The same words before the worker's turn, from the service's header check.
        refusal = header_refusal(src, max_megapixels=limit)
        assert refusal is not None and refusal.reason == reason


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_under_an_address_space_cap_they_are_damaged_not_out_of_memory(tmp_path: Path) -> None:
    """With no limit or a raised one, nothing but the file stops Pillow: under a 6 GB cap the
    ICNS's JPEG 2000 decoder ran out of memory ("not enough memory to decode this 256x256 (0 MP)
    image") before the picture's size was judged."""
    names = [p.name for p in _write_impossible(tmp_path)]
    code = textwrap.dedent(
        """
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (6_000_000_000, 6_000_000_000))
        from pathlib import Path
        from gpen_watch.imaging.errors import ImageInputError
        from gpen_watch.imaging.load import load_image
        for name in sys.argv[2:]:
            for limit in (0.0, 1e8):
                try:
                    load_image(Path(sys.argv[1]) / name, max_megapixels=limit)
                    print(name, limit, "restored")
                except ImageInputError as exc:
                    print(name, limit, exc.kind, exc.reason)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), *names],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    said = out.stdout.splitlines()
    assert len(said) == 2 * len(names), out.stdout + out.stderr
    for line in said:
        name, _limit, kind, reason = line.split(" ", 3)
        assert kind == "failed", line
        assert reason.startswith(IMPOSSIBLE[name][1]), line


def _gif_pillow_grows_to_402_mp() -> bytes:
    """A 1x1 frame at (20000, 20100), which grows Pillow's canvas to 20001x20101 (402 MP), with
    160 KB of comment after it: enough that GIF's LZW could hold that many pixels (one code per
    4,096), so the file is not called damaged."""
    one_pixel = b"\x02\x44\x01\x00"  # clear, pixel 0, end (3-bit codes), then the end of the data
    return gif_frame(20000, 20100, 1, 1, one_pixel + gif_comment(160_000) + b";")


def test_a_frame_its_file_could_hold_is_told_the_limit_set(tmp_path: Path) -> None:
    """Pillow's own guard meets this frame while it opens the file (over twice the limit): the
    refusal names the limit given, and raising it lets the file through."""
    src = tmp_path / "canvas.gif"
    src.write_bytes(_gif_pillow_grows_to_402_mp())
    for limit in (200, 150):
        with pytest.raises(ImageTooLargeError) as err:
            probe_image(src, limit)
        assert err.value.reason.startswith(
            f"a frame or tile inside the file declares 402 MP, over the {limit} MP"
        )
        assert "raise the restore.max_megapixels setting" in err.value.reason
    assert probe_image(src, 500) == ("GIF", (20001, 20101))
    # The worker's memory budget is read from the header with the limit too (a file it cannot
    # read costs the minimum, as if it were 64x64).
    job = FileJob(src, tmp_path / "out.jpg")
    assert photo_cost(job, RestoreConfig(max_megapixels=500)) > 100 * photo_cost(
        job, RestoreConfig(max_megapixels=200)
    )


def test_restore_names_the_limit_set_for_a_file_named_on_the_command_line(tmp_path: Path) -> None:
    src = tmp_path / "canvas.gif"
    src.write_bytes(_gif_pillow_grows_to_402_mp())
    empty = tmp_path / "no-models"
    empty.mkdir()
    command = [sys.executable, "-m", "gpen_watch", "restore", str(src), "-o", str(tmp_path / "out")]
    command += ["--model", str(empty / "none.pth"), "--model-dir", str(empty), "--device", "cpu"]
    command += ["--no-download", "--no-progress"]
    for setting, limit in (([], 200), (["--set", "restore.max_megapixels=150"], 150)):
        proc = subprocess.run([*command, *setting], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert (
            f"{src}: a frame or tile inside the file declares 402 MP, over the {limit} MP limit"
            in proc.stderr
        )
        assert "none.pth" not in proc.stderr  # refused from its header, before the models load


def _icon_picture() -> Image.Image:
    ramp = np.mgrid[0:64, 0:64][1].astype(np.uint8) * 4
    return Image.fromarray(np.dstack([ramp, ramp[::-1], np.full_like(ramp, 90), np.full_like(ramp, 255)]))


def test_real_icons_are_restored(tmp_path: Path) -> None:
    """Icons as programs write them: PNG pictures, a bitmap with its mask (whose declared height
    is twice the picture's), a Mac OS icon; none is taken for damaged."""
    picture = _icon_picture()
    picture.save(tmp_path / "png.ico", sizes=[(16, 16), (32, 32), (64, 64)])
    picture.save(tmp_path / "bitmap.ico", sizes=[(64, 64)], bitmap_format="bmp")
    picture.save(tmp_path / "mac.icns")  # Pillow writes every size up to 1024x1024 (ic10)
    for name, fmt, size in (("png.ico", "ICO", 64), ("bitmap.ico", "ICO", 64), ("mac.icns", "ICNS", 1024)):
        want = np.asarray(picture.resize((size, size)))[:, :, 2::-1]  # BGR
        for limit in (200.0, 0.0):
            image = load_image(tmp_path / name, max_megapixels=limit)
            assert (image.format, image.size) == (fmt, (size, size)), name
            assert np.abs(image.pixels.astype(int) - want).max() <= 1, name


def test_a_real_picture_inside_an_icon_over_the_limit_is_told_to_raise_it(tmp_path: Path) -> None:
    src = tmp_path / "icon.ico"
    _icon_picture().save(src, sizes=[(64, 64)])
    with pytest.raises(ImageTooLargeError) as err:
        load_image(src, max_megapixels=0.001)
    assert err.value.reason == (
        "the picture inside it is 64x64 (0 MP), over the 0.001 MP limit; raise the "
        "restore.max_megapixels setting to restore it"
    )
    assert load_image(src, max_megapixels=0.01).size == (64, 64)
