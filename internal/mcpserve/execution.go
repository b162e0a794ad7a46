package mcpserve

import (
	"cmp"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listedTools is a tools/list answer with each of the host's tools'
// execution.taskSupport, which the SDK's Tool has no member for: it is
// added to the answer's JSON, in both generations. Embedding the SDK's
// result keeps what the SDK does with it after the middleware (its
// resultType, its server info) working.
type listedTools struct {
	*mcp.ListToolsResult
	support map[string]string // tool name → taskSupport
}

// toolExecution is a tool's execution member.
type toolExecution struct {
	TaskSupport string `json:"taskSupport"`
}

// withExecution is list with the task support of the host's tools in it,
// or list itself when the host serves no tasks.
func (s *Server) withExecution(list *mcp.ListToolsResult) mcp.Result {
	if _, ok := s.host.(Tasks); !ok {
		return list
	}
	support := make(map[string]string, len(list.Tools))
	for _, mt := range list.Tools {
		if e, ours := s.tools[mt.Name]; ours {
			support[mt.Name] = cmp.Or(e.Tasks, TaskOptional)
		}
	}
	return &listedTools{ListToolsResult: list, support: support}
}

// MarshalJSON writes the list as the SDK does, each tool of the host's
// with its execution.
func (l *listedTools) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(l.ListToolsResult)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	tools := make([]any, len(l.Tools))
	for i, mt := range l.Tools {
		tools[i] = mt
		if support, ours := l.support[mt.Name]; ours {
			tools[i] = struct {
				*mcp.Tool
				Execution toolExecution `json:"execution"`
			}{mt, toolExecution{support}}
		}
	}
	if m["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}
