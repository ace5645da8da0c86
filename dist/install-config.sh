#!/bin/sh
# meson install script (dist/meson.build): copies the default configuration files from
# DATADIR/sluice/ to their places under SYSCONFDIR, unless a file is there already, so a
# reinstall or upgrade never overwrites what the operator changed. `make uninstall`
# removes them again when they are still the defaults (dist/uninstall.sh).
#   install-config.sh SYSCONFDIR DATADIR
set -eu
etc="${DESTDIR:-}$1"
share="${DESTDIR:-}$2/sluice"
copy() {   # copy FROM TO
	if [ -e "$2" ]; then
		echo "Keeping $2 (exists)"
	else
		mkdir -p "$(dirname "$2")"
		cp "$1" "$2"
		chmod 0644 "$2"
		echo "Installing $2"
	fi
}
copy "$share/sluiced.conf" "$etc/sluice/sluiced.conf"
copy "$share/sluiced.default" "$etc/default/sluiced"
