#!/bin/sh
# Install "Send to gpen-watch" for this user: a Nautilus script, a Dolphin service menu (KDE 5 and
# 6) and a Thunar custom action, each running gpen-watch-send-to. `install.sh --uninstall` removes
# exactly what it made. Nothing here needs root. The .deb and the .rpm put these files in
# /usr/share/gpen-watch/send-to/ and the service menu where Dolphin finds it for every user: run
# from there (`gpen-watch-send-to --install-user`), it adds the Nautilus script and the Thunar
# action only.
#
#   install.sh [--gpen-watch PATH] [--uninstall]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
conf=${XDG_CONFIG_HOME:-$HOME/.config}
wrapper=$data/gpen-watch/send-to/gpen-watch-send-to
nautilus="$data/nautilus/scripts/Send to gpen-watch"
kde6=$data/kio/servicemenus/gpen-watch-send-to.desktop
kde5=$data/kservices5/ServiceMenus/gpen-watch-send-to.desktop
thunar=$conf/Thunar/uca.xml
program=""
remove=0
# The packages' copy: Dolphin's menu is installed for every user already.
packaged=0
[ "$here" = /usr/share/gpen-watch/send-to ] && packaged=1

while [ "$#" -gt 0 ]; do
    case $1 in
        --gpen-watch) program=$2; shift 2 ;;
        --uninstall) remove=1; shift ;;
        *) echo "install.sh: unknown option $1 (--gpen-watch PATH, --uninstall)" >&2; exit 2 ;;
    esac
done

thunar_without() {
    # uca.xml without our action (its <action> ... </action> block naming our unique id).
    awk '
        /<action>/ { block = $0; inside = 1; next }
        inside { block = block "\n" $0
                 if (/<\/action>/) { inside = 0; if (block !~ /gpen-watch-send-to<\/unique-id>/) print block }
                 next }
        { print }
    ' "$thunar"
}

if [ "$remove" -eq 1 ]; then
    rm -f "$wrapper" "$nautilus" "$kde6" "$kde5"
    if [ -f "$thunar" ] && grep -q 'gpen-watch-send-to</unique-id>' "$thunar"; then
        thunar_without >"$thunar.tmp" && mv "$thunar.tmp" "$thunar"
    fi
    echo "removed Send to gpen-watch (Nautilus, Dolphin, Thunar)"
    exit 0
fi

if [ -z "$program" ]; then
    program=$(command -v gpen-watch || true)
fi
if [ -z "$program" ] || [ ! -x "$program" ]; then
    echo "install.sh: gpen-watch is not on PATH; name it: install.sh --gpen-watch /path/to/gpen-watch" >&2
    exit 2
fi

# One wrapper that knows where gpen-watch and the send-to script are; every entry runs it.
mkdir -p "$(dirname "$wrapper")"
cat >"$wrapper" <<WRAP
#!/bin/sh
GPEN_WATCH='$program' exec '$here/gpen-watch-send-to' "\$@"
WRAP
chmod 0755 "$wrapper"

mkdir -p "$(dirname "$nautilus")"
ln -sf "$wrapper" "$nautilus"

if [ "$packaged" -eq 0 ]; then
    for menu in "$kde6" "$kde5"; do
        mkdir -p "$(dirname "$menu")"
        sed "s|^Exec=gpen-watch-send-to |Exec=$wrapper |" "$here/gpen-watch-send-to.desktop" >"$menu"
        chmod 0755 "$menu"  # KDE 6 runs a user's service menu only when it is executable
    done
else
    kde6="/usr/share/kio/servicemenus (every user's, from the package)"
fi

mkdir -p "$(dirname "$thunar")"
if [ ! -f "$thunar" ]; then
    printf '<?xml version="1.0" encoding="UTF-8"?>\n<actions>\n</actions>\n' >"$thunar"
fi
action=$(sed "s|<command>gpen-watch-send-to |<command>$wrapper |" "$here/thunar-action.xml")
thunar_without | awk -v action="$action" '/<\/actions>/ { print action } { print }' >"$thunar.tmp"
mv "$thunar.tmp" "$thunar"

echo "installed Send to gpen-watch for $(id -un): Nautilus ($nautilus), Dolphin ($kde6), Thunar ($thunar)"
echo "Thunar reads its actions at its start: close its windows (thunar -q) to see it."
