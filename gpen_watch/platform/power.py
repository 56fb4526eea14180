"""Whether the machine runs on battery, from what each OS reports: Linux's power_supply folders in
sysfs, macOS's ``pmset -g batt`` and Windows's GetSystemPowerStatus. The readers are plain
functions of those reports, so each one is tested anywhere; the OS modules call them.

True: on battery; False: on mains power, or there is no battery; None: the OS did not say.
"""

from __future__ import annotations

import re
from pathlib import Path

SYSFS_POWER_SUPPLY = Path("/sys/class/power_supply")
# Supplies whose "online" says whether the machine takes power from outside.
_EXTERNAL = ("Mains", "USB")


def _read(folder: Path, name: str) -> str:
    try:
        return (folder / name).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return ""


def sysfs_on_battery(root: Path = SYSFS_POWER_SUPPLY) -> bool | None:
    """From Linux's power_supply class (``root``: /sys/class/power_supply, or a copy of its layout).

    A Mains or USB supply online means mains power; else a system battery discharging, or
    external supplies all offline beside a battery, means battery power. A battery whose scope is
    "Device" belongs to a mouse or a headset, not to this machine, and counts for nothing."""
    try:
        supplies = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return None  # no sysfs here (a BSD, a container without it)
    external: list[bool] = []
    batteries: list[str] = []
    for folder in supplies:
        kind = _read(folder, "type")
        if kind in _EXTERNAL:
            external.append(_read(folder, "online") == "1")
        elif kind == "Battery" and _read(folder, "scope") != "Device":
            batteries.append(_read(folder, "status"))
    if not batteries or any(external):
        return False
    return "Discharging" in batteries or bool(external)


_PMSET_SOURCE = re.compile(r"drawing from '([^']+)'")


def pmset_on_battery(text: str) -> bool | None:
    """From the output of macOS's ``pmset -g batt`` ("Now drawing from 'Battery Power'")."""
    match = _PMSET_SOURCE.search(text)
    if match is None:
        return None
    return match[1] == "Battery Power"


# GetSystemPowerStatus: ACLineStatus 0 offline, 1 online, 255 unknown; BatteryFlag 128 "no system
# battery", 255 unknown (which has that bit set too).
_AC_OFFLINE, _AC_ONLINE = 0, 1
_NO_BATTERY, _UNKNOWN = 128, 255


def windows_on_battery(ac_line_status: int, battery_flag: int) -> bool | None:
    """From SYSTEM_POWER_STATUS's ACLineStatus and BatteryFlag."""
    if battery_flag != _UNKNOWN and battery_flag & _NO_BATTERY:
        return False
    if ac_line_status == _AC_OFFLINE:
        return True
    if ac_line_status == _AC_ONLINE:
        return False
    return None
