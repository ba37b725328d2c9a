#!/bin/sh
# An agent that never finishes: it leaves sleepers in the background (one
# of them a grandchild), records every pid of its group in "pids" in the
# workspace (written whole, then renamed), prints $1 and waits.
sleep 300 &
echo $! > pids.tmp
sleep 300 &
echo $! >> pids.tmp
sh -c 'sleep 300 & echo $! >> pids.tmp; wait' &
echo $! >> pids.tmp
while [ "$(wc -l < pids.tmp)" -lt 4 ]; do sleep 0.01; done
echo $$ >> pids.tmp
mv pids.tmp pids
printf '%s\n' "$1"
wait
