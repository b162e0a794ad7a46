package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestTaskReadsWhatItWrites: the task object is one type, which the
// server writes and the command reads back, every member kept.
func TestTaskReadsWhatItWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
	for _, task := range []Task{
		{ID: "t1", Tool: "note", Status: "completed", CreatedAt: at, UpdatedAt: at.Add(time.Second), ExecutionID: "e1",
			Output: RawJSON(`{"note":"kept <b>é</b>"}`), Progress: &Progress{Done: 1, Total: 2, Message: "half"}},
		{ID: "t2", Tool: "note", Status: "failed", CreatedAt: at, UpdatedAt: at,
			Error: &Error{Code: "invalid_input", Message: "bad", Fields: []FieldError{{Path: "note", Message: "must not be empty"}}, Details: map[string]any{"reason": "x"}}},
		{ID: "t3", Tool: "wipe", Status: "input_required", CreatedAt: at, UpdatedAt: at, ApprovalID: "a1", ApprovalURL: "http://127.0.0.1:1/console?approval=a1",
			Questions: RawJSON(`{"name":{"method":"elicitation/create","params":{"message":"Who?","requestedSchema":{"type":"object"}}}}`)},
	} {
		w := httptest.NewRecorder()
		writeJSON(w, 200, task)
		written := w.Body.String()
		var read Task
		if err := json.Unmarshal([]byte(written), &read); err != nil {
			t.Fatalf("reading %s: %v", written, err)
		}
		again := httptest.NewRecorder()
		writeJSON(again, 200, read)
		if again.Body.String() != written {
			t.Errorf("read and written again:\n%s\nwant\n%s", strings.TrimSpace(again.Body.String()), strings.TrimSpace(written))
		}
	}
}
