#!/bin/sh
# The capability matrix's exec agent (fak runtime protocol v1): "a long
# job" runs until interrupted, "approve me" waits for an approval, any
# other input is answered at once.
IFS= read -r turn
case "$turn" in
*'"text":"a long job"'*)
	echo '{"type":"output","text":"working… "}'
	exec sleep 300
	;;
*'"text":"approve me"'*)
	echo '{"type":"tool.call","id":"t1","name":"touch","input":{"path":"x"}}'
	echo '{"type":"approval.request","id":"t1","text":"touch x?"}'
	IFS= read -r answer
	echo '{"type":"tool.result","id":"t1","output":"answered"}'
	;;
esac
echo '{"type":"output","text":"ok"}'
echo '{"type":"done","summary":"ok"}'
