#!/bin/sh
# A jsonl agent in shell: it keeps the turn line in turn.json, asks to
# create a file, reports what the answer was, charges its usage and says
# done.
IFS= read -r turn
printf '%s\n' "$turn" > turn.json
echo '{"type":"output","text":"thinking… "}'
echo '{"type":"tool.call","id":"t1","name":"touch","input":{"path":"made.txt"}}'
echo '{"type":"approval.request","id":"t1","text":"create made.txt?"}'
IFS= read -r answer
case "$answer" in
*'"approved":true'*)
	touch made.txt
	echo '{"type":"tool.result","id":"t1","output":"created made.txt"}'
	echo '{"type":"output","text":"made it"}'
	;;
*)
	echo '{"type":"tool.result","id":"t1","output":"denied","is_error":true}'
	echo '{"type":"output","text":"did not"}'
	;;
esac
echo '{"type":"usage","input_tokens":12,"output_tokens":3,"spend_micros":150,"tool_calls":1}'
echo '{"type":"done","summary":"asked once"}'
