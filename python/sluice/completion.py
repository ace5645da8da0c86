"""Shell completion for sluicectl, generated from its argument parser with shtab.

`python -m sluice.completion bash` (or `zsh`) prints the script; meson generates and
installs both (dist/meson.build), and `make build` leaves them in build/dist/. Verbs and
options come from `make_parser()`, so a new verb completes without a change here; switch
and port names come from the running daemon when the user presses Tab: the script runs
`sluicectl [--socket PATH] --timeout 1 list-switches` (the --socket of the command line
being completed, if it has one) and offers what it lists.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import shtab

from sluice.ctl import make_parser

SWITCHES = {"bash": "_sluicectl_switches", "zsh": "_sluicectl_switches"}
PORTS = {"bash": "_sluicectl_ports", "zsh": "_sluicectl_ports"}

# Arguments that name an existing port or switch, by destination; the verbs whose NAME is
# an existing port or switch (add-switch's and add-port's NAME is a new one).
PORT_DESTS = {"port", "port1", "port2"}
NAME_IS_PORT = {"del-port", "set-port"}
NAME_IS_SWITCH = {"del-switch"}

# The name lists come from the plain text of list-switches: a header line, then one line a
# switch, "NAME MODE PORT,PORT,..." ("-" when it has no ports). Names have no blanks or commas.
BASH_PREAMBLE = r'''
# sluicectl's global options up to the verb: the socket and the verb's position.
_sluicectl_scan() {
  local i=1 w
  _sluicectl_sock=() _sluicectl_verb_at=0
  while [ $i -lt ${#COMP_WORDS[@]} ]; do
    w=${COMP_WORDS[i]}
    case "$w" in
      --socket) _sluicectl_sock=(--socket "${COMP_WORDS[i+1]}"); i=$((i+2)); continue ;;
      --socket=*) _sluicectl_sock=("$w") ;;
      --timeout) i=$((i+2)); continue ;;
      -*) ;;
      *) _sluicectl_verb_at=$i; return ;;
    esac
    i=$((i+1))
  done
}
_sluicectl_list() {
  sluicectl "${_sluicectl_sock[@]}" --timeout 1 list-switches 2>/dev/null
}
_sluicectl_switches() {
  _sluicectl_scan
  compgen -W "$(_sluicectl_list | awk 'NR > 1 { print $1 }')" -- "$1"
}
_sluicectl_ports() {
  local sw=
  _sluicectl_scan
  [ "$_sluicectl_verb_at" -gt 0 ] && sw=${COMP_WORDS[_sluicectl_verb_at+1]}
  # The ports of the switch after the verb, or every port when that is no switch.
  compgen -W "$(_sluicectl_list | awk -v sw="$sw" '
      NR > 1 { p = ($3 == "-") ? "" : $3; gsub(",", " ", p); of[$1] = p; all = all " " p }
      END { print ((sw in of) ? of[sw] : all) }')" -- "$1"
}
'''

ZSH_PREAMBLE = r'''
_sluicectl_list() {
  local -a sock
  local i=${words[(I)--socket]}
  (( i )) && sock=(--socket ${words[i+1]})
  sluicectl $sock --timeout 1 list-switches 2>/dev/null
}
_sluicectl_switches() {
  compadd -- ${(f)"$(_sluicectl_list | awk 'NR > 1 { print $1 }')"}
}
_sluicectl_ports() {
  compadd -- ${=${(f)"$(_sluicectl_list | awk 'NR > 1 && $3 != "-" {
      gsub(",", " ", $3); print $3 }')"}}
}
'''


def annotated_parser() -> argparse.ArgumentParser:
    """make_parser() with shtab's `complete` set on the arguments that name switches,
    ports and files."""
    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for verb, p in sub.choices.items():
        for action in p._actions:
            dest = action.dest
            if dest == "switch" or (dest == "name" and verb in NAME_IS_SWITCH):
                action.complete = SWITCHES          # type: ignore[attr-defined]
            elif dest in PORT_DESTS or (dest == "name" and verb in NAME_IS_PORT):
                action.complete = PORTS             # type: ignore[attr-defined]
            elif dest == "file":
                action.complete = shtab.FILE        # type: ignore[attr-defined]
    for action in parser._actions:
        if action.dest == "socket":
            action.complete = shtab.FILE            # type: ignore[attr-defined]
    return parser


# shtab 1.5.5 (Debian 12's python3-shtab) reads a bash array of choices as "${!var}", which
# is its first element only: `sluicectl <Tab>` offered 'version' alone. Later versions read
# "${!var[@]}"-style; the same fix here, applied only where the old line is.
SHTAB_155_CHOICES = 'local current_action_choices_var="${current_action}_choices"'
SHTAB_FIXED_CHOICES = 'local current_action_choices_var="${current_action}_choices[@]"'


def script(shell: str) -> str:
    """The completion script for SHELL (bash or zsh)."""
    preamble = {"bash": BASH_PREAMBLE, "zsh": ZSH_PREAMBLE}[shell]
    text = shtab.complete(annotated_parser(), shell=shell, preamble=preamble)
    if shell == "bash":
        text = text.replace(SHTAB_155_CHOICES, SHTAB_FIXED_CHOICES)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sluice.completion",
                                 description="print sluicectl's shell completion script")
    ap.add_argument("shell", choices=("bash", "zsh"))
    args = ap.parse_args(argv)
    sys.stdout.write(script(args.shell))
    return 0


if __name__ == "__main__":
    sys.exit(main())
