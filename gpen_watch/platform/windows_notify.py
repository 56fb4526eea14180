"""Desktop notices on Windows without a tray: a balloon (a toast on Windows 10 and 11) shown by a
short PowerShell script through System.Windows.Forms' NotifyIcon.

With a tray, pystray's win32 backend shows its own balloons; this is for ``--no-tray``. Not run on
Linux, where the project is tested: the script is built and quoted here, and shown by Windows.
"""

from __future__ import annotations

import subprocess

# subprocess.CREATE_NO_WINDOW, which exists only on Windows: no console flashes up.
CREATE_NO_WINDOW = 0x08000000
SHOW_S = 10


def powershell_string(text: str) -> str:
    """A single-quoted PowerShell string: nothing in it is expanded; a quote is doubled."""
    return "'" + text.replace("'", "''").replace("\r", " ").replace("\n", " ") + "'"


def script(title: str, message: str) -> str:
    return "; ".join(
        [
            "Add-Type -AssemblyName System.Windows.Forms",
            "$n = New-Object System.Windows.Forms.NotifyIcon",
            "$n.Icon = [System.Drawing.SystemIcons]::Information",
            "$n.Text = 'gpen-watch'",
            "$n.Visible = $true",
            f"$n.ShowBalloonTip({SHOW_S * 1000}, {powershell_string(title)}, {powershell_string(message)},"
            " [System.Windows.Forms.ToolTipIcon]::Info)",
            # The balloon goes with its icon: keep it for as long as it shows.
            f"Start-Sleep -Seconds {SHOW_S}",
            "$n.Dispose()",
        ]
    )


def notify(title: str, message: str) -> bool:
    try:
        subprocess.Popen(
            ["powershell.exe", "-NoProfile", "-NonInteractive", "-Command", script(title, message)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            creationflags=CREATE_NO_WINDOW,
        )
    except OSError:
        return False
    return True
