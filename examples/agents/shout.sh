#!/bin/sh
# shout.sh: a fak agent speaking the text protocol (docs/runtime-protocol.md).
# It answers each line of the input uppercased, one line at a time with a
# short pause, so the reply visibly streams into the session.
#
#   runtime "shout" {
#     adapter  = "exec"
#     command  = ["/path/to/examples/agents/shout.sh"]
#     protocol = "text"
#   }
#
# Try it by hand: printf 'hello\nworld\n' | ./shout.sh
while IFS= read -r line || [ -n "$line" ]; do
	printf '%s\n' "$line" | tr '[:lower:]' '[:upper:]'
	sleep 0.2
done
