// Package llm turns a [carmy.Registry]'s tools into the tool definitions of
// LLM provider APIs (OpenAI function calling in strict mode, for Chat
// Completions and for the Responses API, Anthropic tool use, Gemini
// function calling), and a model's tool call back into a call
// of the registry ([Dispatch], or a [Dispatcher], which reads every tool's
// schema once for all the calls of a registry). It works over the
// registry's public API alone: [carmy.Registry.Tools],
// [carmy.Registry.ToolsFor], [carmy.Registry.Lookup],
// [carmy.Registry.Execute] and, for a tool that runs only as a task,
// [carmy.Registry.Start], and keeps no state of its own outside the
// values it returns.
//
// Exports made for a caller offer its model only the tools it may call:
// pass the same options to the export and to [Dispatch].
//
//	tools, err := llm.OpenAITools(reg, carmy.WithPrincipal(user), carmy.WithPermissions(grants...))
//	...
//	res, err := llm.Dispatch(ctx, reg, call.Name, call.Arguments, carmy.WithPrincipal(user), carmy.WithPermissions(grants...))
//
// A tool declared [carmy.Deferred] is marked defer_loading in the exports
// whose provider loads tools on demand (Anthropic, the Responses API),
// which then add that provider's tool search.
//
// Each provider's schema dialect has rules of its own, which the exports
// follow; docs/llm-sdks.md in the repository explains them and their
// reasons.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/carmy-dev/carmy"
)

// OpenAITool is the definition of one tool for OpenAI function calling, as
// an element of the "tools" array of a Chat Completions request. Encode it
// with encoding/json, or copy its fields into an SDK's type.
type OpenAITool struct {
	Type     string         `json:"type"` // always "function"
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an [OpenAITool]: the tool's name,
// description and input schema, rewritten for strict mode.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"` // always true
}

// AnthropicTool is the definition of one tool for Anthropic tool use, as
// an element of the "tools" array of a Messages request: one of carmy's
// tools, or (Type set, no input schema) Anthropic's own tool search, which
// [AnthropicTools] adds when some tool is deferred.
type AnthropicTool struct {
	Type        string          `json:"type,omitempty"` // "" for carmy's tools; AnthropicToolSearchType for the tool search
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// DeferLoading keeps the tool out of the model's first view: the model
	// finds it with the tool search ([carmy.Deferred]).
	DeferLoading bool `json:"defer_loading,omitempty"`
}

// Anthropic's tool search, as [AnthropicTools] adds it: the BM25 variant,
// which takes the model's query in words, as carmy's own search_tools
// does.
const (
	AnthropicToolSearchType = "tool_search_tool_bm25_20251119"
	AnthropicToolSearchName = "tool_search_tool_bm25"
)

// OpenAIResponsesTool is the definition of one tool for the OpenAI
// Responses API, as an element of the "tools" array of a request: a
// function (Type "function") in strict mode, or (Type "tool_search",
// nothing else set) OpenAI's hosted tool search, which
// [OpenAIResponsesTools] adds when some tool is deferred.
type OpenAIResponsesTool struct {
	Type        string          `json:"type"` // "function" or "tool_search"
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"` // true for every function
	// DeferLoading keeps the function out of the model's first view: the
	// model finds it with the tool search ([carmy.Deferred]).
	DeferLoading bool `json:"defer_loading,omitempty"`
}

// GeminiFunction is the declaration of one tool for Gemini function
// calling, as an element of the "functionDeclarations" array of a tool in
// a generateContent request. Parameters is nil for a tool that takes no
// input fields.
type GeminiFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ExportError is one reason a provider's tool format cannot express a
// tool. The exports return all of them at once, joined with
// [errors.Join]; reach each with errors.As or by unwrapping the join.
type ExportError struct {
	Provider string // "OpenAI", "Anthropic" or "Gemini"
	Tool     string
	// Path locates the problem in the tool's input, in the notation of
	// [carmy.FieldError] paths, with "[]" for any item of an array and "[*]" for
	// any value of a map: "lines[].tags[*]". "" is the tool itself or its
	// input as a whole.
	Path string
	Err  error
}

// Error names the tool, the provider and the place in the input.
func (e *ExportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "carmy: tool %q for %s: ", e.Tool, e.Provider)
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the problem.
func (e *ExportError) Unwrap() error { return e.Err }

// toolsFor returns every tool of r, or with options those that a caller
// the options describe may call: the tools it would be refused are not
// offered to its model.
func toolsFor(r *carmy.Registry, caller []carmy.CallOption) []carmy.ToolMetadata {
	if len(caller) == 0 {
		return r.Tools()
	}
	var c carmy.Call
	for _, o := range caller {
		o(&c)
	}
	// No call is made yet: the policy decides from the caller and the tool.
	return r.ToolsFor(context.Background(), carmy.Identity{Principal: c.Principal, Session: c.Session, Permissions: c.Permissions, Metadata: c.Metadata})
}

// Provider names, as ExportError.Provider reads; the Responses API is
// OpenAI's too.
const (
	providerOpenAI    = "OpenAI"
	providerAnthropic = "Anthropic"
	providerGemini    = "Gemini"
)

// Tool names each provider accepts. carmy's names may also hold "." and
// be up to 128 long; OpenAI and Anthropic document ^[a-zA-Z0-9_-]{1,64}$.
// Gemini's documents differ between its APIs; this is what all of them
// accept: a letter or "_" first, then letters, digits, "_" and "-", at
// most 64 in all.
var (
	openAIName    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	anthropicName = openAIName
	geminiName    = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)
)

// OpenAI strict mode's documented limits on one schema.
const (
	openAIMaxProperties   = 5000    // object properties in all
	openAIMaxDepth        = 10      // levels of object nesting
	openAIMaxEnumValues   = 1000    // enum values in all
	openAIMaxChars        = 120_000 // property names, $defs names and enum strings, in all
	openAILargeEnum       = 250     // an enum with more values than this...
	openAILargeEnumMaxLen = 15_000  // ...may hold at most this many characters of strings
)

// OpenAITools returns the definitions of r's tools for OpenAI
// function calling in strict mode, sorted by name; given the options that
// describe a caller (as [Dispatch] takes them), only of the tools that
// caller may call ([carmy.Registry.ToolsFor]). Each input schema is
// rewritten to strict mode's rules: every property listed in "required",
// an optional property made nullable (a null union), "additionalProperties"
// false on every object, a map given as a list of {"key", "value"}
// entries, and the keywords strict mode may refuse removed, the constraints
// among them restated in the description. carmy still validates every call
// against the full schema; send calls through [Dispatch], which
// undoes the rewriting.
//
// A tool that strict mode cannot express (a field that takes any JSON
// value, a name OpenAI does not accept, a schema over its documented
// limits) is left out, and the error says why, for each such tool, as
// [*ExportError] values. The definitions of the other tools are returned
// either way.
//
// Chat Completions has no deferred loading: a [carmy.Deferred] tool is
// defined like any other. [OpenAIResponsesTools] defers it.
func OpenAITools(r *carmy.Registry, caller ...carmy.CallOption) ([]OpenAITool, error) {
	return exportTools(r, caller, providerOpenAI, openAIName, "an OpenAI function name", nil, func(x *exporter, m *carmy.ToolMetadata) OpenAITool {
		return OpenAITool{Type: "function", Function: OpenAIFunction{
			Name: m.Name, Description: m.Description, Parameters: x.openAIRoot(m.InputSchema), Strict: true,
		}}
	})
}

// OpenAIResponsesTools returns the definitions of r's tools for the OpenAI
// Responses API, sorted by name, for the caller the options describe as
// [OpenAITools] does, with the same strict-mode schemas and the same
// tools left out. A [carmy.Deferred] tool is marked defer_loading, and
// when any is, OpenAI's hosted tool search ({"type": "tool_search"}) ends
// the list, so that the model loads a deferred tool when it needs it.
// Send calls through [Dispatch], as for [OpenAITools].
func OpenAIResponsesTools(r *carmy.Registry, caller ...carmy.CallOption) ([]OpenAIResponsesTool, error) {
	search := &OpenAIResponsesTool{Type: "tool_search"}
	return exportTools(r, caller, providerOpenAI, openAIName, "an OpenAI function name", search, func(x *exporter, m *carmy.ToolMetadata) OpenAIResponsesTool {
		return OpenAIResponsesTool{Type: "function", Name: m.Name, Description: m.Description,
			Parameters: x.openAIRoot(m.InputSchema), Strict: true, DeferLoading: m.Deferred}
	})
}

// AnthropicTools returns the definitions of r's tools for
// Anthropic tool use, sorted by name; given the options that describe a
// caller, only of the tools that caller may call, as [OpenAITools] does. The input schema is carmy's, which
// Anthropic takes as it is, except that a nullable root (a tool whose
// input is a pointer) is declared as a plain object: a call always sends
// an object, and carmy reads an absent input as {}.
//
// A [carmy.Deferred] tool is marked defer_loading, and when any is,
// Anthropic's tool search ([AnthropicToolSearchType]) ends the list, so
// that the model loads a deferred tool when it needs it.
//
// A tool whose name Anthropic does not accept is left out, and the error
// says so, as [*ExportError] values. The definitions of the other tools
// are returned either way.
func AnthropicTools(r *carmy.Registry, caller ...carmy.CallOption) ([]AnthropicTool, error) {
	search := &AnthropicTool{Type: AnthropicToolSearchType, Name: AnthropicToolSearchName}
	return exportTools(r, caller, providerAnthropic, anthropicName, "an Anthropic tool name", search, func(x *exporter, m *carmy.ToolMetadata) AnthropicTool {
		return AnthropicTool{Name: m.Name, Description: m.Description, InputSchema: x.anthropicRoot(m.InputSchema), DeferLoading: m.Deferred}
	})
}

// GeminiFunctions returns the declarations of r's tools for
// Gemini function calling, sorted by name; given the options that describe
// a caller, only of the tools that caller may call, as [OpenAITools] does. Each input schema is rewritten
// into Gemini's OpenAPI subset: references inlined, "nullable": true
// instead of a null type, upper-case type names, enums for strings only, a
// map given as a list of {"key", "value"} entries, and every keyword
// outside the subset removed, the constraints among them restated in the
// description. Send calls through [Dispatch], which undoes the
// rewriting.
//
// A tool that Gemini cannot declare (a recursive input type, which would
// have to be inlined forever; a field that takes any JSON value; a name
// Gemini does not accept) is left out, and the error says why, for each
// such tool, as [*ExportError] values. The declarations of the other tools
// are returned either way.
func GeminiFunctions(r *carmy.Registry, caller ...carmy.CallOption) ([]GeminiFunction, error) {
	return exportTools(r, caller, providerGemini, geminiName, "a Gemini function name", nil, func(x *exporter, m *carmy.ToolMetadata) GeminiFunction {
		return GeminiFunction{Name: m.Name, Description: m.Description, Parameters: x.geminiRoot(m.InputSchema)}
	})
}

// exportTools converts every tool for one provider, or those the caller
// may call when one is given, sorted by name, then search, the provider's
// tool search, when some tool exported is deferred; a tool the provider
// cannot take is left out, and its problems returned.
func exportTools[T any](r *carmy.Registry, caller []carmy.CallOption, provider string, name *regexp.Regexp, what string, search *T, convert func(*exporter, *carmy.ToolMetadata) T) ([]T, error) {
	var out []T
	var errs []error
	deferred := false
	for _, meta := range toolsFor(r, caller) {
		m := &meta
		x := &exporter{provider: provider, tool: m.Name}
		x.checkName(name, what)
		v := convert(x, m)
		if len(x.errs) > 0 {
			errs = append(errs, x.errs...)
			continue
		}
		out = append(out, v)
		deferred = deferred || m.Deferred
	}
	if deferred && search != nil {
		out = append(out, *search)
	}
	return out, errors.Join(errs...)
}
