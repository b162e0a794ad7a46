package carmy

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over HTTP, a task that waits for its tool's questions shows them
// (questions, as MCP's inputRequests: by question id, each an elicitation
// with its message and requested schema), and POST /tasks/{id}/input
// answers them, on any host, as MCP's tasks/update does.

// serveTaskInput answers the questions one of the caller's tasks waits
// for. The body is a JSON object of answers by question id, each as MCP's
// elicitation result: {"action":"accept","content":{…}}, or the action
// "decline" or "cancel". It answers with the task as it then stands; an
// answer to a question the task does not wait for is ignored.
func (s *httpServer) serveTaskInput(w http.ResponseWriter, req *http.Request, id Identity) {
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeErrorStatus(w, http.StatusUnsupportedMediaType, Errorf(CodeInvalidInput, "send the answers with Content-Type: application/json"))
		return
	}
	body, err := io.ReadAll(req.Body) // bounded by the body limit
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeErrorStatus(w, http.StatusRequestEntityTooLarge, Errorf(CodeInvalidInput, "the answers are larger than the limit of %d bytes", s.limits.body))
			return
		}
		writeError(w, Errorf(CodeCancelled, "the request body could not be read"))
		return
	}
	answers, err := taskAnswers(body)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := req.Context()
	if err := s.r.answerTask(ctx, req.PathValue("id"), id.Principal, answers); err != nil {
		writeError(w, err)
		return
	}
	rec, err := s.r.readTask(ctx, req.PathValue("id"), id.Principal)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.wireTask(withHTTPRequest(ctx, req), rec))
}

// taskAnswers reads the body of POST /tasks/{id}/input: answers by
// question id, each an elicitation result with a known action.
func taskAnswers(body []byte) (map[string]json.RawMessage, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, Errorf(CodeInvalidInput, `the answers must be a JSON object by question id, such as {"confirm":{"action":"accept","content":{"sure":true}}}`)
	}
	out := make(map[string]json.RawMessage, len(raw))
	for _, q := range slices.Sorted(maps.Keys(raw)) { // the first problem, the same each time
		var a mcp.ElicitResult
		if err := json.Unmarshal(raw[q], &a); err != nil {
			return nil, Errorf(CodeInvalidInput, "the answer to %q is not an object with an action and its content", q)
		}
		switch a.Action {
		case "accept", "decline", "cancel":
		default:
			return nil, Errorf(CodeInvalidInput, "the answer to %q has the action %q; want accept, decline or cancel", q, a.Action)
		}
		out[q] = raw[q]
	}
	return out, nil
}
