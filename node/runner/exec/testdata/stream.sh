#!/bin/sh
# A text agent whose reply comes in two parts: the second only once the
# test, having seen the first in the journal, creates "go" in the
# workspace. Proves stdout is streamed while the process runs.
IFS= read -r line
echo "first: $line"
while [ ! -e go ]; do sleep 0.01; done
echo "second"
