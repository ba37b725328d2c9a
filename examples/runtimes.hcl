# Runtimes for a local fleet: bin/fak dev --config examples/runtimes.hcl
# (fak agent --config takes the same blocks). Run from the repository root:
# relative program paths are relative to where fak starts.
#
# echo stays the default runtime; a session picks another by name:
#   bin/fakctl session create --title demo --adapter shout

# Any program, text protocol: the input on stdin, stdout streamed back.
runtime "shout" {
  adapter  = "exec"
  command  = ["examples/agents/shout.sh"]
  protocol = "text"
}

# fak runtime protocol v1 (docs/runtime-protocol.md): tool calls,
# approvals answered by any attached client, usage charged to the budget.
runtime "py-echo" {
  adapter      = "exec"
  command      = ["examples/agents/echo_agent.py"]
  protocol     = "jsonl"
  turn_timeout = "10m"
}

# fak's own agent loop over any OpenAI-compatible endpoint: a local
# llama.cpp server (llama-server -m model.gguf --port 8080), vLLM, Ollama
# (http://127.0.0.1:11434/v1), or a hosted API with an account below.
runtime "local" {
  adapter  = "model"
  endpoint = "http://127.0.0.1:8080/v1"
  model    = "local-model"
  tools    = ["shell", "read_file", "write_file", "list_files"]
  approve  = ["read_file", "list_files"] # the others wait for a person
  sandbox  = "bwrap"                      # Debian: apt-get install bubblewrap
}

# A hosted endpoint: the key is read on the node that runs the session,
# never replicated. Uncomment, and export OPENAI_API_KEY before starting.
# runtime "gpt" {
#   adapter     = "model"
#   endpoint    = "https://api.openai.com/v1"
#   model       = "gpt-4.1"
#   account_ref = "openai-main"
#   tools       = ["read_file", "write_file", "list_files"]
#   approve     = "ask"
#   price       = { input_per_mtok = 2.0, output_per_mtok = 8.0 }
# }
# account "openai-main" { api_key_env = "OPENAI_API_KEY" }
