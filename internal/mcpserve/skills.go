package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
	"github.com/carmy-dev/carmy/internal/skills"
)

// MCP's skills extension (SEP-2640) adds two methods the SDK does not
// route, skills/list and skills/get, answered here on every path a request
// takes (sessionless and session HTTP, single-client connections), and
// serves each skill's files as resources through the SDK's resources/read.

// skillsTTL is how long a client may keep a list of skills, a skill's
// entry, or a skill's file before it asks again: the host's skills stay as
// they are while the server runs, and the generated skill changes only
// when the caller's tools or permissions do.
const skillsTTL = time.Minute

// skillsPage is how many skills one skills/list answer holds at most.
const skillsPage = 100

// rulesURI is the URI of the generated skill's SKILL.md.
const rulesURI = "skill://" + skills.RulesPath + "/" + skills.Manifest

// servesSkills reports whether the server declares the skills extension.
func (s *Server) servesSkills() bool { return len(s.cfg.Skills) > 0 || s.cfg.Rules != nil }

// skillsExtension declares the skills extension in opts, with no optional
// feature (directoryRead is not served).
func (s *Server) skillsExtension(opts *mcp.ServerOptions) {
	if !s.servesSkills() {
		return
	}
	if opts.Capabilities.Extensions == nil {
		opts.Capabilities.Extensions = map[string]any{}
	}
	opts.Capabilities.Extensions[skills.Extension] = map[string]any{}
}

// addSkills adds every file of the server's skills to sdk as a resource,
// and the generated skill's SKILL.md, whose content is each caller's own.
func (s *Server) addSkills(sdk *mcp.Server) {
	s.skills = make(map[string]*skills.Skill, len(s.cfg.Skills))
	for _, sk := range s.cfg.Skills {
		s.skills[sk.URI()] = sk
		for _, f := range sk.Files {
			r := &mcp.Resource{URI: f.URI, Name: f.Path, MIMEType: f.MIME, Size: int64(len(f.Data))}
			if f.Path == skills.Manifest {
				r.Name, r.Description = sk.Name, sk.Description
			}
			sdk.AddResource(r, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return fileResult(f, "public"), nil
			})
		}
	}
	if s.cfg.Rules == nil {
		return
	}
	rules := skills.Generate(skills.Rules{})
	sdk.AddResource(&mcp.Resource{URI: rulesURI, Name: rules.Name, Description: rules.Description, MIMEType: "text/markdown"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id, ok := s.identity(req.GetExtra())
			return fileResult(s.rules(ctx, id, ok).Files[0], "private"), nil
		})
}

// fileResult is the resources/read result of f.
func fileResult(f *skills.File, scope string) *mcp.ReadResourceResult {
	c := &mcp.ResourceContents{URI: f.URI, MIMEType: f.MIME}
	if f.Text() {
		c.Text = string(f.Data)
	} else {
		c.Blob = f.Data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c},
		Cacheable: mcp.Cacheable{TTLMs: int(skillsTTL.Milliseconds()), CacheScope: scope}}
}

// rules is the generated skill as id reads it: only the tools id may list.
// A caller without an identity is told of no tool.
func (s *Server) rules(ctx context.Context, id Identity, ok bool) *skills.Skill {
	if !ok {
		return skills.Generate(skills.Rules{})
	}
	return skills.Generate(s.cfg.Rules(ctx, id))
}

// skillsAnswer answers skills/list or skills/get for id (ok false: a
// caller without an identity), as the sessionless generation writes a
// result (its type and caching attributes) or as a session's does.
func (s *Server) skillsAnswer(ctx context.Context, id Identity, ok bool, method string, params jsontext.Value, sessionless bool) (any, *jsonrpc.Error) {
	var p struct {
		Cursor string `json:"cursor"`
		URI    string `json:"uri"`
	}
	if len(params) > 0 && params.Kind() != 'n' && (params.Kind() != '{' || jsonv2.Unmarshal(params, &p) != nil) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + method + " takes an object"}
	}
	res := map[string]any{}
	if sessionless {
		scope := "public"
		if s.cfg.Rules != nil { // the generated skill's digest is the caller's own
			scope = "private"
		}
		res["resultType"], res["ttlMs"], res["cacheScope"] = "complete", skillsTTL.Milliseconds(), scope
	}
	switch method {
	case "skills/list":
		start, valid := skillsCursor(p.Cursor)
		all := s.cfg.Skills
		if s.cfg.Rules != nil {
			all = append([]*skills.Skill{s.rules(ctx, id, ok)}, all...)
		}
		if !valid || start > len(all) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: cursor is not one skills/list gave"}
		}
		end := min(start+skillsPage, len(all))
		entries := make([]skills.Entry, 0, end-start)
		for _, sk := range all[start:end] {
			entries = append(entries, sk.Entry())
		}
		res["skills"] = entries
		if end < len(all) {
			res["nextCursor"] = strconv.Itoa(end)
		}
	case "skills/get":
		var sk *skills.Skill
		switch {
		case p.URI == "":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: uri, the URI of a skill's SKILL.md, is required"}
		case p.URI == rulesURI && s.cfg.Rules != nil:
			sk = s.rules(ctx, id, ok)
		default:
			sk = s.skills[p.URI]
		}
		if sk == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: no skill is served at " + p.URI + "; skills/list lists them"}
		}
		res["skill"] = sk.Entry()
	}
	return res, nil
}

// skillsCursor reads a page cursor of skills/list: the index of the
// page's first skill, as an earlier page gave it.
func skillsCursor(c string) (int, bool) {
	if c == "" {
		return 0, true
	}
	n, err := strconv.Atoi(c)
	return n, err == nil && n > 0 && strconv.Itoa(n) == c
}

// isSkillsMethod reports whether method is one of the skills extension's.
func isSkillsMethod(method string) bool { return method == "skills/list" || method == "skills/get" }

// skillsHTTP answers a POST over HTTP that is a skills/list or skills/get
// request, sessionless or of a live session, in JSON, and reports whether
// it did; any other request it leaves alone, having written nothing.
func (s *Server) skillsHTTP(w http.ResponseWriter, req *http.Request, body []byte, sessionless bool) bool {
	if !s.servesSkills() || req.Method != http.MethodPost || !bytes.Contains(body, []byte(`"skills/`)) {
		return false
	}
	msg, ok := readRequest(body)
	if !ok || !isSkillsMethod(msg.Method) {
		return false
	}
	if sessionless && !mcpwire.HeaderIs(req.Header, "Mcp-Method", msg.Method) {
		return false // the SDK answers the mismatch
	}
	if !sessionless {
		ses := s.cfg.Sessions.Get(req.Header.Get("Mcp-Session-Id"))
		if ses == nil || ses.ServerSession().InitializeParams() == nil {
			return false // the SDK refuses a request outside a session
		}
	}
	id, _, ok := httpCaller(&mcp.RequestExtra{TokenInfo: tokenInfo(req.Context())})
	res, rpcErr := s.skillsAnswer(req.Context(), id, ok, msg.Method, msg.Params, sessionless)
	return writeAnswer(w, msg.ID, res, rpcErr, sessionless)
}

// skills answers a skills/list or skills/get request of a connection of
// Serve, for the transport's one client, and reports whether it did.
func (c *fastConn) skills(req *jsonrpc.Request) bool {
	ss := c.ss.Load()
	if ss == nil || !req.IsCall() || !isSkillsMethod(req.Method) || !c.s.servesSkills() {
		return false
	}
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(req.Params, &p)
	v, _ := p.Meta[mcp.MetaKeyProtocolVersion].(string)
	sessionless := v >= mcpwire.SessionlessProtocol
	if !sessionless && ss.InitializeParams() == nil {
		return false // the SDK refuses a request before initialize
	}
	res, rpcErr := c.s.skillsAnswer(c.base, c.s.cfg.Stdio, true, req.Method, jsontext.Value(req.Params), sessionless)
	ans := &jsonrpc.Response{ID: req.ID, Error: rpcErr}
	if rpcErr == nil {
		b, err := json.Marshal(res)
		if err != nil {
			ans.Error = rpcError(err)
		}
		ans.Result = b
	}
	_ = c.Connection.Write(c.base, ans)
	return true
}
