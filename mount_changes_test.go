package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// changes returns the tool_changed records of tool.
func (a *auditLog) changes(tool string) []carmy.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []carmy.AuditRecord
	for _, r := range a.recs {
		if r.Decision == carmy.AuditToolChanged && r.Tool == tool {
			out = append(out, r)
		}
	}
	return out
}

type StatIn struct {
	Path string `json:"path"`
}

func TestMountServesToolsAddedUpstream(t *testing.T) {
	ctx := context.Background()
	u := newUpstream()
	audit := &auditLog{}
	own := carmy.Tool(func(StatIn) (string, error) { return "own", nil }, carmy.Read, carmy.Name("fs_stat"), carmy.Description("Stats a file"), carmy.Register(false))
	reg := build(t, carmy.New().ToolSearch().Tool(own).Audit(audit).
		Mount("fs", carmy.Endpoint(u.serveHTTP(t).URL), carmy.EffectFloor(carmy.Write), carmy.MountRequires("files")))
	told := make(chan struct{}, 16)
	cs := mcpConnect(t, serve(t, reg).URL, "2025-11-25", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { told <- struct{}{} },
	})
	files := carmy.Identity{Permissions: []string{"files"}}

	u.add(&mcp.Tool{Name: "grep", Description: "Greps the files for a pattern", InputSchema: json.RawMessage(readSchema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 matches"}}}
	})
	u.add(&mcp.Tool{Name: "wipe", Description: "Wipes the disk", InputSchema: json.RawMessage(emptySchema)}, func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wiped"}}}
	})
	u.add(&mcp.Tool{Name: "stat", Description: "Stats, upstream", InputSchema: json.RawMessage(emptySchema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "upstream's"}}}
	})
	waitFor(t, "fs_grep and fs_wipe to be served", func() bool {
		_, g := reg.Lookup("fs_grep")
		_, w := reg.Lookup("fs_wipe")
		return g && w
	})

	t.Run("its effect is mapped from its hints, under the mount's floor and requires", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			effect  carmy.Effect
			confirm carmy.Confirmation
		}{{"fs_grep", carmy.Write, carmy.ConfirmationNone}, {"fs_wipe", carmy.Destructive, carmy.ConfirmationRequired}} {
			m, _ := reg.Lookup(c.name)
			if m.Effect != c.effect || m.Confirmation != c.confirm || !slices.Equal(m.Requires, []string{"files"}) || string(m.InputSchema) == "" {
				t.Errorf("%s: %+v; want effect %s, confirmation %s, requires [files]", c.name, m, c.effect, c.confirm)
			}
		}
	})
	t.Run("it is callable under every rule", func(t *testing.T) {
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_grep", Input: json.RawMessage(`{"path":"a"}`)}); carmy.CodeOf(err) != carmy.CodePermissionDenied {
			t.Errorf("without the mount's permission: err = %v, want permission_denied", err)
		}
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_grep", Permissions: files.Permissions, Input: json.RawMessage(`{"path":""}`)}); carmy.CodeOf(err) != carmy.CodeInvalidInput {
			t.Errorf("an input its schema refuses: err = %v, want invalid_input", err)
		}
		if u.count("grep") != 0 {
			t.Fatalf("refused calls reached the upstream")
		}
		res, err := reg.Execute(ctx, carmy.Call{Tool: "fs_grep", Permissions: files.Permissions, Input: json.RawMessage(`{"path":"a"}`)})
		if err != nil || !strings.Contains(string(res.Output), "3 matches") || u.count("grep") != 1 {
			t.Fatalf("res = %s, err = %v, upstream calls %d; want the upstream's answer", res.Output, err, u.count("grep"))
		}
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_wipe", Permissions: files.Permissions}); carmy.CodeOf(err) != carmy.CodeConfirmationRequired || u.count("wipe") != 0 {
			t.Errorf("a destructive new tool: err = %v, upstream calls %d; want confirmation_required and none", err, u.count("wipe"))
		}
	})
	t.Run("it is listed to the callers who may list it, and clients are told", func(t *testing.T) {
		names := func(id carmy.Identity) []string {
			var out []string
			for _, m := range reg.ToolsFor(ctx, id) {
				out = append(out, m.Name)
			}
			return out
		}
		if got := names(files); !slices.Contains(got, "fs_grep") || !slices.Contains(got, "fs_wipe") {
			t.Errorf("a caller with the permission lists %v", got)
		}
		if got := names(carmy.Identity{}); slices.Contains(got, "fs_grep") {
			t.Errorf("a caller without the permission lists %v", got)
		}
		select {
		case <-told:
		case <-time.After(5 * time.Second):
			t.Error("carmy's MCP client was not told that the tools changed")
		}
		// The MCP door serves it: it is known, and refuses this caller, who
		// lacks the permission, as carmy does.
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_grep", Arguments: map[string]any{"path": "a"}})
		if err != nil || !res.IsError || !strings.Contains(mcpText(res), "permission") {
			t.Errorf("MCP call: %+v, %v; want carmy's permission refusal", res, err)
		}
	})
	t.Run("it is searchable", func(t *testing.T) {
		found, err := reg.Execute(ctx, carmy.Call{Tool: "search_tools", Permissions: files.Permissions, Input: json.RawMessage(`{"query":"grep pattern"}`)})
		if err != nil || !strings.Contains(string(found.Output), `"fs_grep"`) {
			t.Errorf("search_tools found %s, %v; want fs_grep", found.Output, err)
		}
	})
	t.Run("a name that collides is refused, logged and audited", func(t *testing.T) {
		waitFor(t, "a tool_changed record of fs_stat", func() bool { return len(audit.changes("fs_stat")) > 0 })
		if r := audit.changes("fs_stat")[0]; !strings.Contains(r.Detail, "refused") {
			t.Errorf("record %+v; want it to say the tool was refused", r)
		}
		res, err := reg.Execute(ctx, carmy.Call{Tool: "fs_stat", Input: json.RawMessage(`{"path":"a"}`)})
		if m, _ := reg.Lookup("fs_stat"); err != nil || !strings.Contains(string(res.Output), "own") || m.Description != "Stats a file" {
			t.Errorf("the own tool fs_stat: %s, %v, %+v", res.Output, err, m)
		}
		if r := audit.changes("fs_grep"); len(r) == 0 || r[0].Digest == "" {
			t.Errorf("fs_grep's arrival: records %+v, want one with its definition's hash", r)
		}
	})
}

// mcpListener connects an MCP client with opts to the server at base, in
// protocol version, and returns once the client listens for the server's
// notifications: at once in a session, and once the server acknowledged
// its listen stream (subscriptions/listen) in the sessionless protocol,
// which the client opens without waiting for it.
func mcpListener(t *testing.T, base, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "carmy-test", Version: "1"}, opts)
	acked := make(chan struct{}, 1)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				acked <- struct{}{}
			}
			return next(ctx, method, req)
		}
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if version >= "2026-07-28" {
		select {
		case <-acked:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not acknowledge the listen stream")
		}
	}
	return cs
}

// mcpText is the text of a tool result's content.
func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMountEffectRisesWithTheUpstream(t *testing.T) {
	ctx := context.Background()
	u := newUpstream()
	audit := &auditLog{}
	reg := build(t, carmy.New().Audit(audit).Mount("fs", carmy.Endpoint(u.serveHTTP(t).URL)))
	read := func(ro bool) {
		u.add(&mcp.Tool{Name: "read", Description: "Reads a file", InputSchema: json.RawMessage(readSchema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro}}, func(json.RawMessage) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents"}}}
		})
	}
	in := json.RawMessage(`{"path":"a"}`)
	if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Input: in}); err != nil {
		t.Fatal(err)
	}

	t.Run("a hint that raises the effect takes effect at once", func(t *testing.T) {
		read(false) // readOnlyHint dropped: Destructive, as the hints say by default
		waitFor(t, "fs_read's effect to rise", func() bool {
			m, _ := reg.Lookup("fs_read")
			return m.Effect == carmy.Destructive && len(audit.changes("fs_read")) > 0
		})
		if m, _ := reg.Lookup("fs_read"); m.Confirmation != carmy.ConfirmationRequired || m.ParallelSafe {
			t.Errorf("risen to Destructive: %+v; want a person's confirmation and no parallel calls", m)
		}
		before := u.count("read")
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Input: in}); carmy.CodeOf(err) != carmy.CodeConfirmationRequired || u.count("read") != before {
			t.Errorf("err = %v; want confirmation_required, the upstream not called", err)
		}
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Permissions: []string{"confirm:fs_read"}, Input: in}); err != nil || u.count("read") != before+1 {
			t.Errorf("confirmed: err = %v; want the call served, not held", err)
		}
		if r := audit.changes("fs_read"); len(r) != 1 || r[0].Effect != carmy.Destructive || r[0].Digest == "" {
			t.Errorf("tool_changed records %+v; want one, with the new effect and hash", r)
		}
	})
	t.Run("a hint that would lower it keeps it", func(t *testing.T) {
		read(true)
		waitFor(t, "the second change to be audited", func() bool { return len(audit.changes("fs_read")) == 2 })
		if m, _ := reg.Lookup("fs_read"); m.Effect != carmy.Destructive || m.Confirmation != carmy.ConfirmationRequired {
			t.Errorf("%+v; want the effect kept at Destructive", m)
		}
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Input: in}); carmy.CodeOf(err) != carmy.CodeConfirmationRequired {
			t.Errorf("err = %v; want confirmation_required still", err)
		}
	})
	t.Run("an approval binds the definition in force", func(t *testing.T) {
		_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Input: in})
		var e *carmy.Error
		if !errors.As(err, &e) {
			t.Fatal(err)
		}
		grant := "confirm:fs_read:" + e.Details["digest"].(string)
		read(false) // the hints change again: the definition a person saw is gone
		waitFor(t, "the third change to be audited", func() bool { return len(audit.changes("fs_read")) == 3 })
		before := u.count("read")
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Permissions: []string{grant}, Input: in}); carmy.CodeOf(err) != carmy.CodeConfirmationRequired || u.count("read") != before {
			t.Errorf("a grant of the old definition: err = %v; want confirmation_required, the upstream not called", err)
		}
	})
}

// TestMountAddsToolsAsBuilt: a tool an upstream adds after Build is made
// with the settings the registry was built with; what its Builder is told
// later belongs to the registries built later.
func TestMountAddsToolsAsBuilt(t *testing.T) {
	u := newUpstream()
	b := carmy.New().Mount("fs", carmy.Endpoint(u.serveHTTP(t).URL))
	reg := build(t, b)
	b.Use(func(carmy.CallFunc) carmy.CallFunc {
		return func(context.Context, *carmy.Request) (carmy.Result, error) {
			return carmy.Result{}, errors.New("a middleware given after Build")
		}
	}).Timeout(time.Nanosecond).RateLimit(1, time.Hour)
	u.add(&mcp.Tool{Name: "grep", Description: "Greps the files for a pattern", InputSchema: json.RawMessage(readSchema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 matches"}}}
	})
	waitFor(t, "fs_grep to be served", func() bool { _, ok := reg.Lookup("fs_grep"); return ok })
	if m, _ := reg.Lookup("fs_grep"); m.Timeout != carmy.DefaultTimeout {
		t.Errorf("fs_grep's timeout = %v; want the registry's %v", m.Timeout, carmy.DefaultTimeout)
	}
	for i := range 2 {
		res, err := reg.Execute(context.Background(), carmy.Call{Tool: "fs_grep", Input: json.RawMessage(`{"path":"a"}`)})
		if err != nil || !strings.Contains(string(res.Output), "3 matches") {
			t.Fatalf("call %d of fs_grep = %s, %v; want the upstream's answer", i+1, res.Output, err)
		}
	}
}

// TestMountTakesChangedDefinitions: a definition the upstream changes is
// served as it now is, at once: its description and schemas byte for
// byte, the operator's overrides still applied, its effect never lower
// than it was, audited with the new definition's hash, and carmy's
// clients told, in sessions and on the sessionless protocol's listen
// streams. A definition whose schema carmy cannot compile holds that tool
// alone, saying why.
func TestMountTakesChangedDefinitions(t *testing.T) {
	ctx := context.Background()
	u := newUpstream()
	audit := &auditLog{}
	reg := build(t, carmy.New().Audit(audit).
		Mount("fs", carmy.Endpoint(u.serveHTTP(t).URL), carmy.MountTool("read", carmy.ToolOverride{Requires: []string{"files"}})))
	srv := serve(t, reg)
	told := map[string]chan struct{}{}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		ch := make(chan struct{}, 16)
		told[version] = ch
		mcpListener(t, srv.URL, version, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} },
		})
	}
	files := []string{"files"}
	// The new schema's keys are in an order no encoder of maps would
	// choose: it is published as the upstream wrote it.
	const linesSchema = `{"type":"object","required":["path","lines"],"properties":{"path":{"type":"string","minLength":1},"lines":{"type":"integer","minimum":1}}}`
	redefine := func(desc, schema string, readOnly bool) {
		u.add(&mcp.Tool{Name: "read", Description: desc, InputSchema: json.RawMessage(schema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly}}, func(args json.RawMessage) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "lines of " + string(args)}}}
		})
	}
	// A change is audited once it is served: waiting for its record
	// waits for the whole change.
	audited := func(n int) func() bool {
		return func() bool { return len(audit.changes("fs_read")) >= n }
	}

	t.Run("the new description and schemas are served at once", func(t *testing.T) {
		redefine("Reads lines of a file", linesSchema, true)
		waitFor(t, "fs_read's new definition", audited(1))
		m, _ := reg.Lookup("fs_read")
		if string(m.InputSchema) != linesSchema || m.Effect != carmy.Read || !slices.Equal(m.Requires, []string{"files"}) {
			t.Errorf("fs_read = %+v; want the upstream's schema byte for byte, effect read, and the override's requires", m)
		}
		var listed bool
		for _, l := range reg.ToolsFor(ctx, carmy.Identity{Permissions: files}) {
			listed = listed || l.Name == "fs_read" && string(l.InputSchema) == linesSchema
		}
		if !listed {
			t.Error("the callers' lists do not show the new definition")
		}
		before := u.count("read")
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Permissions: files, Input: json.RawMessage(`{"path":"a"}`)}); carmy.CodeOf(err) != carmy.CodeInvalidInput {
			t.Errorf("an input the old schema took and the new one refuses: err = %v, want invalid_input", err)
		}
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Input: json.RawMessage(`{"path":"a","lines":2}`)}); carmy.CodeOf(err) != carmy.CodePermissionDenied {
			t.Errorf("without the override's permission: err = %v, want permission_denied", err)
		}
		if u.count("read") != before {
			t.Fatal("refused calls reached the upstream")
		}
		res, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Permissions: files, Input: json.RawMessage(`{"path":"a","lines":2}`)})
		if err != nil || !strings.Contains(string(res.Output), "lines of") || u.count("read") != before+1 {
			t.Errorf("fs_read = %s, %v; want the upstream's answer", res.Output, err)
		}
		recs := audit.changes("fs_read")
		if len(recs) != 1 || recs[0].Digest == "" || !strings.Contains(recs[0].Detail, "definition changed") {
			t.Errorf("tool_changed records %+v; want one, with the new definition's hash", recs)
		}
		for version, ch := range told {
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				t.Errorf("the %s client was not told that the tools changed", version)
			}
		}
	})
	t.Run("its effect rises with the hints and never falls", func(t *testing.T) {
		redefine("Reads lines of a file, maybe more", linesSchema, false)
		waitFor(t, "the second definition", audited(2))
		redefine("Reads lines of a file, read only", linesSchema, true)
		waitFor(t, "the third definition", audited(3))
		m, _ := reg.Lookup("fs_read")
		if m.Effect != carmy.Destructive || m.Confirmation != carmy.ConfirmationRequired {
			t.Errorf("fs_read = %+v; want Destructive kept, and a person's confirmation", m)
		}
		recs := audit.changes("fs_read")
		if len(recs) != 3 || recs[1].Digest == recs[2].Digest {
			t.Errorf("tool_changed records %+v; want three, each with its definition's hash", recs)
		}
	})
	t.Run("a schema carmy cannot compile holds that tool alone", func(t *testing.T) {
		redefine("Reads, broken", `{"type":"object","properties":{"path":{"$ref":"#/$defs/nowhere"}}}`, true)
		waitFor(t, "the broken definition to be audited", audited(4))
		_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Permissions: []string{"files", "confirm:fs_read"}, Input: json.RawMessage(`{"path":"a","lines":2}`)})
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || e.Details["reason"] != "definition_refused" ||
			!strings.Contains(e.Message, "mount fs") || !strings.Contains(e.Message, "read") {
			t.Errorf("err = %v; want unavailable naming mount fs and read, reason definition_refused", err)
		}
		if e != nil && (!strings.Contains(e.Message, "does not compile") || strings.Contains(e.Message, "carmy.")) {
			t.Errorf("message %q; want the schema's own problem alone, nothing of carmy's insides", e.Message)
		}
		if r := audit.changes("fs_read"); !strings.Contains(r[len(r)-1].Detail, "held") || r[len(r)-1].Digest == "" {
			t.Errorf("record %+v; want it held, with the refused definition's hash", r[len(r)-1])
		}
		for _, l := range reg.ToolsFor(ctx, carmy.Identity{Permissions: files}) {
			if l.Name == "fs_read" {
				t.Error("a held tool is listed")
			}
		}
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_sum", Input: json.RawMessage(`{"a":1,"b":2}`)}); err != nil {
			t.Errorf("the mount's other tools: %v", err)
		}
		redefine("Reads lines of a file, mended", linesSchema, true)
		waitFor(t, "the mended definition", audited(5))
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Permissions: []string{"files", "confirm:fs_read"}, Input: json.RawMessage(`{"path":"a","lines":2}`)}); err != nil {
			t.Errorf("the mended definition: %v", err)
		}
	})
}

// TestMountApprovalBindsTheDefinition: an approval given for a mounted
// tool's definition does not authorize a call of the definition the
// upstream changed it to, and a call checked under the old definition
// that has not reached the upstream when it changes never does.
func TestMountApprovalBindsTheDefinition(t *testing.T) {
	ctx := context.Background()
	u := newUpstream()
	audit := &auditLog{}
	gate := make(chan struct{})
	waiting := make(chan struct{}, 1)
	reg := build(t, carmy.New().Audit(audit).Mount("fs", carmy.Endpoint(u.serveHTTP(t).URL)).
		Use(func(next carmy.CallFunc) carmy.CallFunc {
			return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
				if req.Call.RequestID == "held" { // this call waits, checked, before it reaches the upstream
					waiting <- struct{}{}
					<-gate
				}
				return next(ctx, req)
			}
		}))
	redescribe := func(name, desc string) {
		u.add(&mcp.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(readSchema)}, func(json.RawMessage) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted"}}}
		})
	}
	in := json.RawMessage(`{"path":"a"}`)

	t.Run("an approval of the old definition", func(t *testing.T) {
		_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_delete", Principal: "agent", Input: in})
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeConfirmationRequired {
			t.Fatalf("err = %v; want confirmation_required", err)
		}
		approval := e.Details["approval_id"].(string)
		redescribe("delete", "Deletes a file, and its backups")
		// A change is audited once it is served.
		waitFor(t, "fs_delete's new definition", func() bool { return len(audit.changes("fs_delete")) == 1 })
		if err := reg.Decide(ctx, approval, true, "person:alice"); err != nil {
			t.Fatal(err)
		}
		_, err = reg.Execute(ctx, carmy.Call{Tool: "fs_delete", Principal: "agent", Input: in})
		if !errors.As(err, &e) || e.Code != carmy.CodeConfirmationRequired || e.Details["approval_id"] == approval ||
			!strings.Contains(e.Message, "changed the definition") {
			t.Errorf("the approved retry: err = %v; want confirmation_required, a new approval, saying the definition changed", err)
		}
		if n := u.count("delete"); n != 0 {
			t.Errorf("the upstream was called %d times; want none", n)
		}
	})
	t.Run("a task that waits for the approval", func(t *testing.T) {
		task, err := reg.Start(ctx, carmy.Call{Tool: "fs_delete", Principal: "agent2", Input: in})
		if err != nil || task.Status != carmy.TaskInputRequired || task.ApprovalID == "" {
			t.Fatalf("Start = %+v, %v; want input_required with an approval", task, err)
		}
		redescribe("delete", "Deletes a file, its backups and its history")
		waitFor(t, "fs_delete's second change to be audited", func() bool { return len(audit.changes("fs_delete")) == 2 })
		if err := reg.Decide(ctx, task.ApprovalID, true, "person:alice"); err != nil {
			t.Fatal(err)
		}
		_, err = task.Wait(ctx)
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || e.Details["reason"] != "tool_changed" {
			t.Errorf("the task approved under the old definition: err = %v; want unavailable, tool_changed", err)
		}
		if n := u.count("delete"); n != 0 {
			t.Errorf("the upstream was called %d times; want none", n)
		}
	})
	t.Run("a call checked under the old definition", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", RequestID: "held", Input: in})
			done <- err
		}()
		<-waiting
		before := u.count("read")
		n := len(audit.changes("fs_read"))
		u.add(&mcp.Tool{Name: "read", Description: "Reads a file, or a device", InputSchema: json.RawMessage(readSchema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(json.RawMessage) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "device contents"}}}
		})
		waitFor(t, "fs_read's change to be audited", func() bool { return len(audit.changes("fs_read")) > n })
		close(gate)
		err := <-done
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || e.Details["reason"] != "tool_changed" || !e.Retryable {
			t.Errorf("err = %v; want unavailable, retryable, reason tool_changed", err)
		}
		if u.count("read") != before {
			t.Error("the call checked under the old definition reached the upstream")
		}
		res, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", RequestID: "held-again", Input: in})
		if err != nil || !strings.Contains(string(res.Output), "device contents") {
			t.Errorf("called again: %s, %v; want the new definition served", res.Output, err)
		}
	})
}

// TestMountPoliciesGovernLaterTools: under Cedar policies, a tool an
// upstream adds or changes while carmy serves is governed by the
// policies in force at once, by its server and effect as by its input;
// one the policies do not validate against is refused, logged and
// audited, and the mount's other tools keep working.
func TestMountPoliciesGovernLaterTools(t *testing.T) {
	ctx := context.Background()
	// Every tool of this upstream takes a path, which a policy reads.
	u := &upstream{calls: map[string]int{}, server: mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)}
	tool := func(name, schema string, readOnly bool) {
		u.add(&mcp.Tool{Name: name, Description: "The " + name + " tool", InputSchema: json.RawMessage(schema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly}}, func(json.RawMessage) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " done"}}}
		})
	}
	tool("read", readSchema, true)
	audit := &auditLog{}
	const policies = `@id("all")
permit(principal, action, resource);

@id("fs-destroys-nothing")
@reason("the fs mount's destructive tools are off")
forbid(principal, action == Action::"call", resource) when { resource.server == "fs" && resource.effect == "destructive" };
`
	const notEtc = `
@id("not-etc")
forbid(principal, action == Action::"call", resource) when { context.input.path like "/etc/*" };`
	file := filepath.Join(t.TempDir(), "policies.cedar")
	if err := os.WriteFile(file, []byte(policies+notEtc), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := build(t, carmy.New().Audit(audit).Mount("fs", carmy.Endpoint(u.serveHTTP(t).URL)).PolicyFile(file).PolicyPoll(10*time.Millisecond))
	call := func(name, path string) error {
		_, err := reg.Execute(ctx, carmy.Call{Tool: name, Permissions: []string{"confirm:" + name}, Input: json.RawMessage(`{"path":"` + path + `"}`)})
		return err
	}
	policiesOf := func(err error) []string {
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodePermissionDenied {
			return nil
		}
		ids, _ := e.Details["policy"].([]string)
		return ids
	}

	t.Run("a tool added later", func(t *testing.T) {
		tool("grep", readSchema, true)
		tool("wipe", readSchema, false) // no hints: destructive
		waitFor(t, "fs_grep and fs_wipe to be served", func() bool {
			_, g := reg.Lookup("fs_grep")
			_, w := reg.Lookup("fs_wipe")
			return g && w
		})
		if err := call("fs_grep", "a"); err != nil {
			t.Errorf("fs_grep: %v", err)
		}
		if err := call("fs_grep", "/etc/passwd"); !slices.Equal(policiesOf(err), []string{"not-etc"}) {
			t.Errorf("fs_grep of /etc: err = %v; want refused by not-etc", err)
		}
		err := call("fs_wipe", "a")
		if !slices.Equal(policiesOf(err), []string{"fs-destroys-nothing"}) || !strings.Contains(err.Error(), "destructive tools are off") {
			t.Errorf("fs_wipe: err = %v; want refused by fs-destroys-nothing, with its reason", err)
		}
		if u.count("wipe") != 0 {
			t.Error("the refused call reached the upstream")
		}
	})
	t.Run("a tool whose effect rises", func(t *testing.T) {
		tool("grep", readSchema, false)
		waitFor(t, "fs_grep's effect to rise", func() bool { m, _ := reg.Lookup("fs_grep"); return m.Effect == carmy.Destructive })
		before := u.count("grep")
		if err := call("fs_grep", "a"); !slices.Equal(policiesOf(err), []string{"fs-destroys-nothing"}) || u.count("grep") != before {
			t.Errorf("fs_grep risen to destructive: err = %v; want refused by fs-destroys-nothing at once", err)
		}
	})
	t.Run("a tool the policies do not validate against", func(t *testing.T) {
		tool("ls", emptySchema, true) // not-etc reads context.input.path, which ls has not
		waitFor(t, "fs_ls to be refused", func() bool { return len(audit.changes("fs_ls")) > 0 })
		if _, ok := reg.Lookup("fs_ls"); ok {
			t.Error("fs_ls is served")
		}
		if r := audit.changes("fs_ls")[0]; !strings.Contains(r.Detail, "refused") || !strings.Contains(r.Detail, "not-etc") {
			t.Errorf("record %+v; want it refused, naming the policy", r)
		}
		n := len(audit.changes("fs_read"))
		tool("read", emptySchema, true)
		waitFor(t, "fs_read's change to be audited", func() bool { return len(audit.changes("fs_read")) > n })
		var e *carmy.Error
		if err := call("fs_read", "a"); !errors.As(err, &e) || e.Details["reason"] != "definition_refused" || !strings.Contains(e.Message, "not-etc") {
			t.Errorf("fs_read changed past the policies: err = %v; want unavailable, definition_refused, naming the policy", err)
		}
		if err := call("fs_read", "a"); carmy.CodeOf(err) != carmy.CodeUnavailable || u.count("read") != 0 {
			t.Errorf("fs_read: err = %v, upstream calls %d; want it held", err, u.count("read"))
		}
		if err := call("fs_grep", "/etc/x"); !slices.Contains(policiesOf(err), "not-etc") {
			t.Errorf("the policies in force: fs_grep of /etc: err = %v; want refused by not-etc still", err)
		}
	})
	t.Run("a policy file that changes serves what the old policies refused", func(t *testing.T) {
		if err := os.WriteFile(file, []byte(policies), 0o600); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "fs_ls and the new fs_read to be served", func() bool {
			_, ok := reg.Lookup("fs_ls")
			return ok && call("fs_read", "/etc/x") == nil
		})
		if err := call("fs_ls", "a"); err != nil {
			t.Errorf("fs_ls: %v", err)
		}
	})
}

// TestMountTakesTaskSupportChanges: a tool whose task support changes
// upstream (execution.taskSupport) is served with the new support at once
// and audited; one that now runs only as a task of an upstream that does
// not declare tasks is held, saying why, and served again once it
// changes back.
func TestMountTakesTaskSupportChanges(t *testing.T) {
	ctx := context.Background()
	u := newUpstream()
	audit := &auditLog{}
	reg := build(t, carmy.New().Audit(audit).Mount("fs", carmy.Endpoint(u.serveHTTP(t).URL)))
	support := func(mode string) {
		f := func(body []byte) []byte {
			if !bytes.Contains(body, []byte(`"tools":[`)) {
				return body
			}
			return bytes.Replace(body, []byte(`"name":"read"`), []byte(`"execution":{"taskSupport":"`+mode+`"},"name":"read"`), 1)
		}
		u.rewrite.Store(&f)
		// Adding the tool again has the upstream say its list changed.
		u.add(&mcp.Tool{Name: "read", Description: "Reads a file", InputSchema: json.RawMessage(readSchema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(args json.RawMessage) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents of " + string(args)}}}
		})
	}
	read := func() error {
		_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Input: json.RawMessage(`{"path":"a"}`)})
		return err
	}

	support("forbidden")
	waitFor(t, "fs_read's new task support", func() bool { return len(audit.changes("fs_read")) == 1 })
	if m, _ := reg.Lookup("fs_read"); m.Tasks != carmy.TaskForbidden {
		t.Errorf("fs_read runs as tasks %s; want forbidden, as the upstream now says", m.Tasks)
	}
	if err := read(); err != nil {
		t.Errorf("fs_read after the change: %v; want it served", err)
	}
	if _, err := reg.Start(ctx, carmy.Call{Tool: "fs_read", Input: json.RawMessage(`{"path":"a"}`)}); err == nil {
		t.Error("fs_read started as a task; want it refused, as the upstream forbids tasks")
	}

	support("required") // and the upstream declares no tasks
	waitFor(t, "fs_read to be held", func() bool { return len(audit.changes("fs_read")) == 2 })
	var e *carmy.Error
	if err := read(); !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || e.Details["reason"] != "task_support_changed" || !strings.Contains(e.Message, "does not declare tasks") {
		t.Errorf("fs_read held: %v; want unavailable, task_support_changed, saying why", err)
	}

	support("optional")
	waitFor(t, "fs_read to be served again", func() bool { return len(audit.changes("fs_read")) == 3 })
	if err := read(); err != nil {
		t.Errorf("fs_read after it changed back: %v; want it served", err)
	}
}
