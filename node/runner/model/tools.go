package model

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/fak-dev/fak/node/runner/proc"
)

// toolSpecs describe the built-in tools to the model.
var toolSpecs = map[string]shared.FunctionDefinitionParam{
	ToolShell: {
		Name:        ToolShell,
		Description: openai.String("Run a shell command (sh -c) in the workspace. Returns its output (stdout and stderr) and, when it fails, its exit status."),
		Parameters: shared.FunctionParameters{
			"type":                 "object",
			"properties":           map[string]any{"command": map[string]any{"type": "string", "description": "The command line."}},
			"required":             []string{"command"},
			"additionalProperties": false,
		},
	},
	ToolReadFile: {
		Name:        ToolReadFile,
		Description: openai.String("Read a text file of the workspace."),
		Parameters: shared.FunctionParameters{
			"type":                 "object",
			"properties":           map[string]any{"path": map[string]any{"type": "string", "description": "The file's path, relative to the workspace."}},
			"required":             []string{"path"},
			"additionalProperties": false,
		},
	},
	ToolWriteFile: {
		Name:        ToolWriteFile,
		Description: openai.String("Write a file of the workspace, replacing what it held; missing directories are created."),
		Parameters: shared.FunctionParameters{
			"type": "object",
			"properties": map[string]any{
				"path":    map[string]any{"type": "string", "description": "The file's path, relative to the workspace."},
				"content": map[string]any{"type": "string", "description": "The whole new content."},
			},
			"required":             []string{"path", "content"},
			"additionalProperties": false,
		},
	},
	ToolListFiles: {
		Name:        ToolListFiles,
		Description: openai.String("List a directory of the workspace; directories end in /."),
		Parameters: shared.FunctionParameters{
			"type":                 "object",
			"properties":           map[string]any{"path": map[string]any{"type": "string", "description": "The directory, relative to the workspace (default: the workspace itself)."}},
			"additionalProperties": false,
		},
	},
}

// toolParams are the tools offered to the model, in toolOrder.
func toolParams(enabled []string) []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, name := range toolOrder {
		if slices.Contains(enabled, name) {
			out = append(out, openai.ChatCompletionFunctionTool(toolSpecs[name]))
		}
	}
	return out
}

// tools runs tool calls confined to one workspace.
type tools struct {
	enabled   []string
	workspace string // absolute
	maxOutput int
	sandbox   string
	hide      []string
	groups    *proc.Groups
	env       []string // added to the shell's clean environment
}

// toolArgs are the arguments of any built-in tool.
type toolArgs struct {
	Command string  `json:"command"`
	Path    string  `json:"path"`
	Content *string `json:"content"`

	rel string // Path within the workspace, checked
}

// summary says what a call does, for its approval.
func (a toolArgs) summary(tool string) string {
	switch tool {
	case ToolShell:
		return a.Command
	case ToolWriteFile:
		return fmt.Sprintf("%s (%d bytes)", a.rel, len(*a.Content))
	default:
		return a.rel
	}
}

// toolResult is a tool call's outcome. text is what the model is fed.
type toolResult struct {
	text    string
	ok      bool
	ran     bool // the tool ran (refused and denied calls did not)
	refused bool
	denied  bool
}

// refusal is why fak will not run a call.
type refusal struct{ why string }

func (r *refusal) Error() string { return r.why }

func refusef(format string, args ...any) *refusal {
	return &refusal{why: fmt.Sprintf(format, args...)}
}

func refused(err error) toolResult {
	return toolResult{text: "refused: " + err.Error(), refused: true}
}

// check parses a call's arguments and refuses what would not run: an
// unknown or disabled tool, bad arguments, a path that leaves the
// workspace by its spelling (.., an absolute path elsewhere). A symlink
// leading outside is found when the call runs.
func (ts *tools) check(name, arguments string) (toolArgs, error) {
	var a toolArgs
	if !slices.Contains(ts.enabled, name) {
		return a, refusef("there is no tool %q (the tools are %s)", name, strings.Join(ts.enabled, ", "))
	}
	if strings.TrimSpace(arguments) != "" {
		if err := json.Unmarshal([]byte(arguments), &a); err != nil {
			return a, refusef("the arguments are not a JSON object: %v", err)
		}
	}
	if ts.workspace == "" {
		return a, refusef("this node gives the session no workspace")
	}
	switch name {
	case ToolShell:
		if strings.TrimSpace(a.Command) == "" {
			return a, refusef("shell needs a command")
		}
		return a, nil
	case ToolReadFile, ToolWriteFile:
		if a.Path == "" {
			return a, refusef("%s needs a path", name)
		}
		if name == ToolWriteFile && a.Content == nil {
			return a, refusef("write_file needs a content")
		}
	case ToolListFiles:
		if a.Path == "" {
			a.Path = "."
		}
	}
	rel, err := ts.within(a.Path)
	a.rel = rel
	return a, err
}

// within maps a path to a name relative to the workspace, refusing one
// that leaves it by its spelling.
func (ts *tools) within(p string) (string, error) {
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(ts.workspace, filepath.Clean(p))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", refusef("%s is outside the workspace", p)
		}
		return rel, nil
	}
	rel := filepath.Clean(p)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", refusef("%s leads outside the workspace", p)
	}
	return rel, nil
}

// run runs a checked call. The error is the turn's end (its context), not
// the tool's failure, which the result reports.
func (ts *tools) run(ctx context.Context, name string, a toolArgs) (toolResult, error) {
	switch name {
	case ToolShell:
		return ts.shell(ctx, a.Command)
	case ToolReadFile:
		return ts.readFile(a.rel), nil
	case ToolWriteFile:
		return ts.writeFile(a.rel, *a.Content), nil
	default:
		return ts.listFiles(a.rel), nil
	}
}
