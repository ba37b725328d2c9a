# Shared by the fake providers (sourced): they stand in for Claude Code and
# Gemini CLI in the fak guard end-to-end tests and run the hooks they are
# given the way those providers do — every command handler of the event
# whose matcher accepts the source or reason, through a shell, with the hook
# JSON on stdin; a hook's failure or stdout is reported on stderr (Claude
# Code would inject SessionStart stdout into the model's context).
#
# Steps (arguments after the provider's own flags):
#   start:SOURCE:ID   SessionStart with source SOURCE and session id ID
#   end:REASON:ID     SessionEnd with reason REASON and session id ID
#   say:TEXT          print TEXT on stdout
#   wait:FIFO         print "waiting" and block until a line arrives on FIFO
#   exit:N            exit with status N once the steps are done
set -eu

# run_hooks SETTINGS_FILE EVENT MATCH JSON
run_hooks() {
	jq -r --arg ev "$2" --arg m "$3" '
		(.hooks[$ev] // [])[]
		| select((.matcher // "") as $mt
			| $mt == "" or $mt == "*" or ($mt | split("|") | map(. == $m) | any))
		| .hooks[] | select(.type == "command") | .command' "$1" |
	while IFS= read -r cmd; do
		if out=$(printf '%s' "$4" | sh -c "$cmd"); then :; else
			echo "$NAME: hook exited $?: $cmd" >&2
		fi
		if [ -n "$out" ]; then echo "$NAME: hook printed to stdout: $out" >&2; fi
	done
}

# run_steps STEP... (the provider defines start_json and end_json and sets
# SETTINGS)
run_steps() {
	echo "launch=${FAK_LAUNCH_ID:-} session=${FAK_SESSION_ID:-} socket=${FAK_GUARD_SOCKET:-}"
	code=0
	for step in "$@"; do
		kind=${step%%:*}
		rest=${step#*:}
		arg=${rest%%:*}
		id=${rest#*:}
		case $kind in
		start) run_hooks "$SETTINGS" SessionStart "$arg" "$(start_json "$arg" "$id")" ;;
		end) run_hooks "$SETTINGS" SessionEnd "$arg" "$(end_json "$arg" "$id")" ;;
		say) echo "$rest" ;;
		wait)
			echo waiting
			read -r _ <"$rest"
			;;
		exit) code=$rest ;;
		*)
			echo "$NAME: unknown step $step" >&2
			exit 99
			;;
		esac
	done
	exit "$code"
}
