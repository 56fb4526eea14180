#!/bin/sh
# /usr/bin/gpen-watch: the gpen-watch of the Debian package, in its private venv. The check runs
# isolated (-I): a gpen_watch folder in the current one must not stand in for the installed one.
venv=/opt/gpen-watch/venv
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/bin/gpen-watch" ] \
    || ! "$venv/bin/python" -I -c 'import gpen_watch' 2>/dev/null; then
    echo "gpen-watch: its program files in $venv are damaged or missing, so it cannot start." >&2
    echo "Reinstall the package: sudo apt install --reinstall gpen-watch" >&2
    echo "Your photos, settings and model files are kept elsewhere and are not affected." >&2
    exit 1
fi
exec "$venv/bin/gpen-watch" "$@"
