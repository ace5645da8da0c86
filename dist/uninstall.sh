#!/bin/sh
# make uninstall (docs/install.md): removes what `make install` put in place, as meson's
# install log lists it (with DESTDIR if there was one), plus what meson does not list:
# the configuration files install-config.sh copied, when they are still the defaults
# (a changed one is kept, and said so), Python's byte-code caches in the package, and the
# directories of sluice's own that are left empty.
#   DESTDIR=... uninstall.sh BUILDDIR    (the DESTDIR of the install, if it had one)
set -eu
log="$1/meson-logs/install-log.txt"
[ -r "$log" ] || { echo "uninstall: $log not found: nothing was installed from $1" >&2; exit 1; }

# The configuration: SYSCONFDIR/{sluice/sluiced.conf,default/sluiced} against the defaults
# in DATADIR/sluice/; install-paths.sh (dist/meson.build) says where those are.
. "$1/dist/install-paths.sh"
etc="${DESTDIR:-}$SYSCONFDIR"
share="${DESTDIR:-}$DATADIR/sluice"
for pair in "sluice/sluiced.conf:sluiced.conf" "default/sluiced:sluiced.default"; do
	f="$etc/${pair%%:*}"
	d="$share/${pair#*:}"
	[ -e "$f" ] || continue
	if [ -e "$d" ] && cmp -s "$f" "$d"; then
		rm -f "$f" && echo "Deleting $f"
	else
		echo "Keeping $f (changed from the default)"
	fi
done
rmdir "$etc/sluice" 2>/dev/null || true

grep -v '^#' "$log" | while read -r f; do
	[ -e "$f" ] || [ -L "$f" ] || continue
	[ -d "$f" ] && [ ! -L "$f" ] && continue   # directories: below, when empty
	rm -f "$f" && echo "Deleting $f"
	case "$f" in */sluice/*.py) rm -rf "$(dirname "$f")/__pycache__" ;; esac
done
# Directories named sluice (the Python package, doc, share, libexec) or inside one, deepest
# first, when empty.
grep -v '^#' "$log" | while read -r f; do
	d=$(dirname "$f")
	while :; do
		case "$d" in */sluice|*/sluice/*) echo "$d" ;; *) break ;; esac
		d=$(dirname "$d")
	done
done | sort -ur | while read -r d; do
	rmdir "$d" 2>/dev/null || true
done
