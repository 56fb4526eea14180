#!/bin/sh
# /usr/bin/gpen-watch: the gpen-watch of the package, the one-folder bundle in /opt/gpen-watch.
program=/opt/gpen-watch/gpen-watch
if [ ! -x "$program" ] || [ ! -f /opt/gpen-watch/_internal/base_library.zip ]; then
    echo "gpen-watch: its program files in /opt/gpen-watch are damaged or missing, so it cannot start." >&2
    echo "Reinstall the package: @REINSTALL@" >&2
    echo "Your photos, settings and model files are kept elsewhere and are not affected." >&2
    exit 1
fi
exec "$program" "$@"
