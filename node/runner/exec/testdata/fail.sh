#!/bin/sh
# A text agent that fails: 30 lines of stderr, then exit status 3.
echo "partial answer"
i=1
while [ $i -le 30 ]; do
	echo "complaint $i" >&2
	i=$((i + 1))
done
exit 3
