package mcpserve

import (
	"cmp"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listedTools is a tools/list answer with each of the host's tools'
// execution.taskSupport, and defer_loading for a deferred tool (as
// mcp-go's WithDeferLoading writes it), which the SDK's Tool has no
// members for: they are added to the answer's JSON, in both generations. Embedding the SDK's
// result keeps what the SDK does with it after the middleware (its
// resultType, its server info) working.
type listedTools struct {
	*mcp.ListToolsResult
	support  map[string]string // tool name → taskSupport
	deferred map[string]bool   // the deferred tools, by name
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
	l := &listedTools{ListToolsResult: list, support: make(map[string]string, len(list.Tools)), deferred: map[string]bool{}}
	for _, mt := range list.Tools {
		if e, ours := s.table()[mt.Name]; ours {
			l.support[mt.Name] = cmp.Or(e.Tasks, TaskOptional)
			if e.Deferred {
				l.deferred[mt.Name] = true
			}
		}
	}
	return l
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
				Execution    toolExecution `json:"execution"`
				DeferLoading bool          `json:"defer_loading,omitempty"`
			}{mt, toolExecution{support}, l.deferred[mt.Name]}
		}
	}
	if m["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}
