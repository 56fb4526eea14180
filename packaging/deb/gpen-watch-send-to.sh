#!/bin/sh
# /usr/bin/gpen-watch-send-to: "Send to gpen-watch" of the package (the .deb and the .rpm). Dolphin's
# service menu, which the package installs for every user, runs it with the files chosen; it runs
# the send-to script in /usr/share/gpen-watch/send-to/ with the package's gpen-watch.
# Nautilus scripts and Thunar actions live in each user's home, which no package writes into:
#   gpen-watch-send-to --install-user     adds them for the user who runs it (no root needed)
#   gpen-watch-send-to --uninstall-user   takes them away again
# File managers hand over absolute paths, so no photo's path is taken for one of these options.
here=/usr/share/gpen-watch/send-to
case ${1:-} in
    --install-user) exec sh "$here/install.sh" --gpen-watch /usr/bin/gpen-watch ;;
    --uninstall-user) exec sh "$here/install.sh" --uninstall ;;
esac
GPEN_WATCH=${GPEN_WATCH:-/usr/bin/gpen-watch}
export GPEN_WATCH
exec "$here/gpen-watch-send-to" "$@"
