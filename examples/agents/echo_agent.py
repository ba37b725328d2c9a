#!/usr/bin/env python3
"""echo_agent.py: a fak agent speaking fak runtime protocol v1 (jsonl).

Python 3, standard library only. See docs/runtime-protocol.md.

For each turn fak starts this program in the session's workspace and writes
one "turn" line on its stdin. The agent answers on stdout:

- an ordinary input is echoed back, a word at a time;
- an input "!run COMMAND" asks for approval to run COMMAND (a tool call),
  runs it in the workspace with a shell if a person approves, and reports
  the result;

then it reports its usage and says done.

    runtime "py-echo" {
      adapter  = "exec"
      command  = ["python3", "/path/to/examples/agents/echo_agent.py"]
      protocol = "jsonl"
    }

Try it by hand:

    echo '{"type":"turn","protocol":1,"session_id":"s","epoch":1,"input":{"seq":3,"text":"hi there"},"context":[]}' \
        | python3 echo_agent.py
"""

import json
import os
import subprocess
import sys

RUN_PREFIX = "!run "
TOOL_TIMEOUT_SECONDS = 120
MAX_TOOL_OUTPUT = 64 * 1024


def send(**message):
    """Writes one line to fak. Flushing matters: fak journals lines as they come."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def receive():
    """Reads one line from fak."""
    line = sys.stdin.readline()
    if not line:
        sys.exit("fak closed stdin before the line this agent waits for")
    return json.loads(line)


def words(text):
    return len(text.split())


def echo(text):
    """Streams "echo: TEXT" a word at a time; returns the words written."""
    reply = "echo: " + text
    parts = reply.split(" ")
    for i, part in enumerate(parts):
        send(type="output", text=part if i == len(parts) - 1 else part + " ")
    return words(reply)


def run_tool(command):
    """Asks approval for a shell command, runs it if approved; returns the words written."""
    call_id = "call_1"
    send(type="tool.call", id=call_id, name="shell", input={"command": command})
    send(type="approval.request", id=call_id, text="run `%s` in the workspace?" % command)
    answer = receive()
    if answer.get("type") != "approval.answer" or answer.get("id") != call_id:
        sys.exit("expected the approval.answer for %s, got %r" % (call_id, answer))
    if not answer.get("approved"):
        # Every approval is followed by the tool.result it gated, run or not.
        send(type="tool.result", id=call_id, output="denied: not run", is_error=True)
        reply = "not running `%s`: denied." % command
        send(type="output", text=reply)
        return words(reply)
    try:
        done = subprocess.run(
            command,
            shell=True,
            cwd=os.environ.get("FAK_WORKSPACE", "."),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TOOL_TIMEOUT_SECONDS,
        )
        output = (done.stdout + done.stderr).decode("utf-8", "replace")
        failed = done.returncode != 0
    except subprocess.TimeoutExpired:
        output, failed = "timed out after %d s" % TOOL_TIMEOUT_SECONDS, True
    if len(output) > MAX_TOOL_OUTPUT:
        output = output[:MAX_TOOL_OUTPUT] + "\n[truncated]"
    send(type="tool.result", id=call_id, output=output, is_error=failed)
    reply = "ran `%s`%s:\n%s" % (command, " (it failed)" if failed else "", output)
    send(type="output", text=reply)
    return words(reply)


def main():
    turn = receive()
    if turn.get("type") != "turn" or turn.get("protocol") != 1:
        sys.exit("not a fak runtime protocol v1 turn line: %r" % turn)
    text = turn["input"]["text"].strip()
    context = turn["context"]
    inputs = sum(1 for event in context if event["kind"] == "input")

    if text.startswith(RUN_PREFIX) and text[len(RUN_PREFIX):].strip():
        written, tool_calls = run_tool(text[len(RUN_PREFIX):].strip()), 1
    else:
        written, tool_calls = echo(text), 0

    send(
        type="usage",
        input_tokens=sum(words(event["text"]) for event in context),
        output_tokens=written,
        tool_calls=tool_calls,
    )
    send(type="done", summary="%d words; %d inputs in context" % (written, inputs))


if __name__ == "__main__":
    main()
