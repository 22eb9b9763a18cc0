# SPDX-License-Identifier: MIT
# Bash completion for ringprof (installed into share/bash-completion/completions).
# Options come from the installed binary's own help (`ringprof help CMD`), so they
# cannot drift from it; values for the options that take a fixed set are listed here.
_ringprof()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local cmds="run top snapshot report analyze merge segments probe help"
	local cmd=${COMP_WORDS[1]} opts

	COMPREPLY=()
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur"))
		return
	fi
	if [ "$cmd" = help ]; then
		[ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
		return
	fi
	case $prev in
	--format)
		COMPREPLY=($(compgen -W "text json pstats folded prom chrome gantt msgpack pprof
			aiq aiq-text" -- "$cur"))
		return ;;
	--session|-s)
		# the sessions with an engine or producers: /dev/shm/ringprof.<session>.*
		COMPREPLY=($(compgen -W "$(ls /dev/shm 2>/dev/null |
			sed -n 's/^ringprof\.\([A-Za-z0-9_-]*\)\..*/\1/p' | sort -u)" -- "$cur"))
		return ;;
	--sort) COMPREPLY=($(compgen -W "calls self cum p50 p90 p99" -- "$cur")); return ;;
	--view) COMPREPLY=($(compgen -W "names sources threads" -- "$cur")); return ;;
	--input) COMPREPLY=($(compgen -W "chrome nat" -- "$cur")); return ;;
	--nesting) COMPREPLY=($(compgen -W "torch ringprof" -- "$cur")); return ;;
	--offcpu) COMPREPLY=($(compgen -W "auto on off" -- "$cur")); return ;;
	--async-expire-ms) COMPREPLY=($(compgen -W "auto off" -- "$cur")); return ;;
	--window|--prometheus-window) COMPREPLY=($(compgen -W "10s 1m 5m" -- "$cur")); return ;;
	--snapshot-dir|--dir)
		COMPREPLY=($(compgen -d -- "$cur"))
		return ;;
	esac
	if [[ $cur == -* ]]; then
		opts=$("${COMP_WORDS[0]}" help "$cmd" 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' |
			sort -u)
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -f -- "$cur")) # snapshots, traces, -o files
}
complete -o filenames -F _ringprof ringprof
