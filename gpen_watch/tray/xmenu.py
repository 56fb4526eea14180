"""A small popup menu window for the xorg tray icon, which has no native menu.

Drawn with Pillow and shown as an override-redirect window at the pointer, the way panel menus
appear. It grabs the pointer and keyboard while open: a click on an item runs it, a click anywhere
else or Escape closes it. It lives on the icon's loop thread and X connection; the icon routes the
events of its window here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw

from gpen_watch.tray import icon as icons

log = logging.getLogger(__name__)

FONT_PX = 13
ROW = 22
SEPARATOR_ROW = 9
PAD_X = 10
CHECK_W = 20  # room for a checkbox before the text
MIN_WIDTH = 160
COLOURS = {
    "bg": "#f5f5f5",
    "border": "#8a8a8a",
    "text": "#1a1a1a",
    "disabled": "#7a7a7a",
    "hover": "#2f6fb3",
    "hover_text": "#ffffff",
    "separator": "#c8c8c8",
}


@dataclass(frozen=True)
class Row:
    top: int
    height: int
    text: str
    item: Any  # the pystray MenuItem; None for a separator
    enabled: bool
    checked: bool | None


def layout(items: Any, separator: Any) -> tuple[list[Row], int, int]:
    """Rows for pystray menu items (``separator``: pystray's Menu.SEPARATOR), with the menu's size."""
    font = icons.font(FONT_PX)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    rows: list[Row] = []
    top, width = 1, MIN_WIDTH
    for item in items:
        if not item.visible:
            continue
        text = str(item.text)
        if item is separator:
            rows.append(Row(top, SEPARATOR_ROW, "", None, False, None))
            top += SEPARATOR_ROW
            continue
        left, _t, right, _b = probe.textbbox((0, 0), text, font=font)
        width = max(width, round(right - left) + 2 * PAD_X + CHECK_W)
        rows.append(Row(top, ROW, text, item, bool(item.enabled), item.checked))
        top += ROW
    return rows, width, top + 1


def render(rows: list[Row], width: int, height: int, hover: int | None) -> Image.Image:
    font = icons.font(FONT_PX)
    image = Image.new("RGB", (width, height), COLOURS["bg"])
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, width - 1, height - 1), outline=COLOURS["border"])
    for i, row in enumerate(rows):
        if row.item is None:
            y = row.top + row.height // 2
            draw.line((PAD_X // 2, y, width - 1 - PAD_X // 2, y), fill=COLOURS["separator"])
            continue
        ink = COLOURS["text"] if row.enabled else COLOURS["disabled"]
        if i == hover and row.enabled:
            draw.rectangle((1, row.top, width - 2, row.top + row.height - 1), fill=COLOURS["hover"])
            ink = COLOURS["hover_text"]
        cy = row.top + row.height / 2
        if row.checked is not None:  # a checkbox, empty or ticked, as GTK menus draw them
            x0, y0 = PAD_X, round(cy)
            draw.rectangle((x0, y0 - 6, x0 + 12, y0 + 6), outline=ink)
            if row.checked:
                draw.line((x0 + 3, y0, x0 + 5, y0 + 3, x0 + 10, y0 - 3), fill=ink, width=2)
        draw.text((PAD_X + CHECK_W, cy), row.text, font=font, fill=ink, anchor="lm")
    return image


class MenuWindow:
    def __init__(self, display: Any, icon: Any, rows: list[Row], x: int, y: int, w: int, h: int) -> None:
        import Xlib.X

        self._display, self._icon, self.rows = display, icon, rows
        self.size = (w, h)
        self.closed = False
        self._hover: int | None = None
        screen = display.screen()
        self.window = screen.root.create_window(
            x,
            y,
            w,
            h,
            0,
            screen.root_depth,
            window_class=Xlib.X.InputOutput,
            override_redirect=True,
            event_mask=(
                Xlib.X.ExposureMask
                | Xlib.X.ButtonPressMask
                | Xlib.X.PointerMotionMask
                | Xlib.X.KeyPressMask
                | Xlib.X.LeaveWindowMask
            ),
        )
        self.window.set_wm_name("gpen-watch menu")
        self._gc = self.window.create_gc()
        self.window.map()
        mask = Xlib.X.ButtonPressMask | Xlib.X.PointerMotionMask
        self.window.grab_pointer(True, mask, Xlib.X.GrabModeAsync, Xlib.X.GrabModeAsync, 0, 0, 0)
        self.window.grab_keyboard(True, Xlib.X.GrabModeAsync, Xlib.X.GrabModeAsync, 0)
        self._draw()

    @classmethod
    def open(cls, display: Any, menu: Any, icon: Any, x: int, top: int, bottom: int) -> MenuWindow:
        """Show ``menu`` (a pystray Menu) at the pointer's ``x``, below the icon spanning ``top`` to
        ``bottom`` on the screen where it fits, else above it (a panel at the bottom)."""
        rows, w, h = layout(menu.items, type(menu).SEPARATOR)
        g = display.screen().root.get_geometry()
        left = x if x + w <= g.width else max(0, x - w)
        y = bottom if bottom + h <= g.height else max(0, top - h)
        return cls(display, icon, rows, left, y, w, h)

    def row_at(self, x: int, y: int) -> int | None:
        w, h = self.size
        if not (0 <= x < w and 0 <= y < h):
            return None
        for i, row in enumerate(self.rows):
            if row.top <= y < row.top + row.height:
                return i
        return None

    def handle(self, event: Any) -> None:
        import Xlib.X
        import Xlib.XK

        if event.type == Xlib.X.Expose:
            self._draw()
        elif event.type == Xlib.X.MotionNotify:
            hover = self.row_at(event.event_x, event.event_y) if event.window.id == self.window.id else None
            if hover != self._hover:
                self._hover = hover
                self._draw()
        elif event.type == Xlib.X.KeyPress:
            if self._display.keycode_to_keysym(event.detail, 0) == Xlib.XK.XK_Escape:
                self.close()
        elif event.type == Xlib.X.ButtonPress:
            # With the pointer grabbed, a click anywhere lands here: in the window coordinates of
            # the window it was on, so it is placed by its root coordinates.
            pos = self.window.translate_coords(self._display.screen().root, event.root_x, event.root_y)
            index = self.row_at(pos.x, pos.y)
            self.close()
            row = self.rows[index] if index is not None else None
            if row is not None and row.item is not None and row.enabled:
                try:
                    row.item(self._icon)
                except Exception:
                    log.exception("tray menu item %r failed", row.text)

    def close(self) -> None:
        if self.closed:
            return
        import Xlib.X

        self.closed = True
        self._display.ungrab_pointer(Xlib.X.CurrentTime)
        self._display.ungrab_keyboard(Xlib.X.CurrentTime)
        self.window.destroy()
        self._display.flush()

    def _draw(self) -> None:
        if self.closed:
            return
        image = render(self.rows, *self.size, self._hover)
        image.tostring = image.tobytes  # type: ignore[attr-defined]  # python-xlib's put_pil_image
        self.window.put_pil_image(self._gc, 0, 0, image)
        self._display.flush()
