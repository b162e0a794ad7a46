package carmy_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// skillsFolder is a folder of two skills, one under a prefix with a file
// besides its SKILL.md.
func skillsFolder() fstest.MapFS {
	return fstest.MapFS{
		"git-workflow/SKILL.md":          {Data: []byte("---\nname: git-workflow\ndescription: Follow the team's Git conventions\n---\n\nBranch from main.\n")},
		"acme/refunds/SKILL.md":          {Data: []byte("---\nname: refunds\ndescription: Process refunds per policy\nlicense: Apache-2.0\nmetadata:\n  version: \"2\"\n---\n\nSee examples/email.md.\n")},
		"acme/refunds/examples/email.md": {Data: []byte("Dear customer,\n")},
	}
}

// skillsRegistry serves skillsFolder and two tools: notes, which anyone
// may call, and pay, which needs the permission billing, a person's
// approval, and keeps to a rate. alice may pay; bob may not.
func skillsRegistry(t *testing.T) *carmy.Registry {
	t.Helper()
	notes := carmy.Tool(func(carmy.Context, struct{}) (string, error) { return "ok", nil }, carmy.Read, carmy.Name("notes"), carmy.Description("Read notes"), carmy.Register(false))
	pay := carmy.Tool(func(carmy.Context, struct {
		Cents int `json:"cents"`
	}) (string, error) {
		return "paid", nil
	}, carmy.Write, carmy.Name("pay"), carmy.Description("Pay an invoice"), carmy.Requires("billing"),
		carmy.RequireConfirmation(), carmy.RateLimit(3, time.Minute), carmy.Register(false))
	tokens := carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice-secret"), Principal: "alice", Permissions: []string{"billing"}},
		carmy.Token{SHA256: carmy.HashToken("bob-secret"), Principal: "bob"},
	)
	return build(t, carmy.New().Tool(notes, pay).Authenticate(tokens).Skills(skillsFolder()))
}

// skillEntry is an entry of skills/list and skills/get.
type skillEntry struct {
	URI         string         `json:"uri"`
	Frontmatter map[string]any `json:"frontmatter"`
	Resources   []struct {
		URI    string `json:"uri"`
		Digest string `json:"digest"`
		Size   int    `json:"size"`
	} `json:"resources"`
}

// skillsAnswer is a result of skills/list or skills/get, or its error.
type skillsAnswer struct {
	Result struct {
		ResultType string       `json:"resultType"`
		TTLMs      *int         `json:"ttlMs"`
		CacheScope string       `json:"cacheScope"`
		Skills     []skillEntry `json:"skills"`
		Skill      *skillEntry  `json:"skill"`
		NextCursor string       `json:"nextCursor"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// skillsClient sends skills/ requests as token's holder to the server at
// base, in one generation: "2026-07-28", sessionless, or "2025-11-25", in
// a session it opens.
type skillsClient struct {
	t       *testing.T
	base    string
	token   string
	version string
	session string
}

func newSkillsClient(t *testing.T, base, token, version string) *skillsClient {
	c := &skillsClient{t: t, base: base, token: token, version: version}
	if version >= "2026-07-28" {
		return c
	}
	res, _ := mcpExchange(t, base, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"})
	c.session = res.Header.Get("Mcp-Session-Id")
	if c.session == "" {
		t.Fatalf("initialize %s: no session", version)
	}
	c.send("notifications/initialized", "", false)
	return c
}

// send posts a request of method with params (a JSON object, "" for
// none), or a notification, and returns its answer.
func (c *skillsClient) send(method, params string, call bool) skillsAnswer {
	c.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + c.token, "Content-Type": "application/json", "Mcp-Protocol-Version": c.version}
	meta := ""
	if c.session != "" {
		h["Mcp-Session-Id"] = c.session
	} else {
		h["Mcp-Method"] = method
		meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + c.version + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	}
	switch {
	case params == "" && meta == "":
		params = "{}"
	case params == "":
		params = "{" + meta + "}"
	case meta != "" && params == "{}":
		params = "{" + meta + "}"
	case meta != "":
		params = params[:len(params)-1] + "," + meta + "}"
	}
	id := `"id":7,`
	if !call {
		id = ""
	}
	_, body := mcpExchange(c.t, c.base, `{"jsonrpc":"2.0",`+id+`"method":"`+method+`","params":`+params+`}`, h)
	var a skillsAnswer
	if call {
		if err := json.Unmarshal(body, &a); err != nil {
			c.t.Fatalf("%s: %v: %s", method, err, body)
		}
	}
	return a
}

// read reads a resource of the server as the client, through the SDK's
// resources/read, and returns its bytes.
func (c *skillsClient) read(uri string) (string, string) {
	c.t.Helper()
	params, _ := json.Marshal(map[string]string{"uri": uri})
	h := map[string]string{"Authorization": "Bearer " + c.token, "Content-Type": "application/json", "Mcp-Protocol-Version": c.version}
	body := `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":` + string(params) + `}`
	if c.session != "" {
		h["Mcp-Session-Id"] = c.session
	} else {
		h["Mcp-Method"], h["Mcp-Name"] = "resources/read", uri
		body = `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"` + uri + `","_meta":{"io.modelcontextprotocol/protocolVersion":"` + c.version + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`
	}
	_, raw := mcpExchange(c.t, c.base, body, h)
	var res struct {
		Result struct {
			Contents []struct {
				Text string `json:"text"`
			} `json:"contents"`
			CacheScope string `json:"cacheScope"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Result.Contents) != 1 {
		c.t.Fatalf("resources/read %s: %v: %s", uri, err, raw)
	}
	return res.Result.Contents[0].Text, res.Result.CacheScope
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Every skill of the folder, and the generated one, is listed with its
// front matter and every file's digest and size; skills/get gives the same
// entry; every file read back has the digest and size its entry says; an
// unknown URI is invalid params. In both generations, the sessionless one
// with the result type and the caching attributes.
func TestMCPSkills(t *testing.T) {
	t.Parallel()
	srv := serve(t, skillsRegistry(t))
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			c := newSkillsClient(t, srv.URL, "alice-secret", version)
			list := c.send("skills/list", "", true)
			if list.Error != nil {
				t.Fatalf("skills/list: %+v", list.Error)
			}
			var uris []string
			for _, s := range list.Result.Skills {
				uris = append(uris, s.URI)
			}
			want := []string{"skill://carmy/tool-rules/SKILL.md", "skill://acme/refunds/SKILL.md", "skill://git-workflow/SKILL.md"}
			if fmt.Sprint(uris) != fmt.Sprint(want) {
				t.Fatalf("skills/list: %v, want %v", uris, want)
			}
			sessionless := version >= "2026-07-28"
			r := list.Result
			if sessionless != (r.ResultType == "complete" && r.TTLMs != nil && r.CacheScope == "private") || !sessionless && r.CacheScope != "" {
				t.Errorf("skills/list in %s: resultType %q ttlMs %v cacheScope %q", version, r.ResultType, r.TTLMs, r.CacheScope)
			}
			refunds := list.Result.Skills[1]
			if refunds.Frontmatter["name"] != "refunds" || refunds.Frontmatter["license"] != "Apache-2.0" ||
				fmt.Sprint(refunds.Frontmatter["metadata"]) != "map[version:2]" {
				t.Errorf("front matter %v: want every field as written", refunds.Frontmatter)
			}
			if len(refunds.Resources) != 2 || refunds.Resources[0].URI != refunds.URI || refunds.Resources[1].URI != "skill://acme/refunds/examples/email.md" {
				t.Fatalf("resources of refunds: %+v; want SKILL.md, then examples/email.md", refunds.Resources)
			}
			for _, s := range list.Result.Skills {
				got := c.send("skills/get", `{"uri":"`+s.URI+`"}`, true)
				a, _ := json.Marshal(got.Result.Skill)
				b, _ := json.Marshal(s)
				if got.Error != nil || string(a) != string(b) {
					t.Errorf("skills/get %s: %s, %+v; want the listed entry %s", s.URI, a, got.Error, b)
				}
				for _, f := range s.Resources {
					text, scope := c.read(f.URI)
					if digest(text) != f.Digest || len(text) != f.Size {
						t.Errorf("%s: read %d bytes of digest %s; the entry says %d, %s", f.URI, len(text), digest(text), f.Size, f.Digest)
					}
					if generated := strings.HasPrefix(f.URI, "skill://carmy/"); sessionless && generated != (scope == "private") {
						t.Errorf("%s: cacheScope %q", f.URI, scope)
					}
				}
			}
			for _, params := range []string{`{"uri":"skill://nothing/SKILL.md"}`, `{}`, `{"uri":"skill://acme/refunds/examples/email.md"}`} {
				if got := c.send("skills/get", params, true); got.Error == nil || got.Error.Code != -32602 {
					t.Errorf("skills/get %s: %+v, want invalid params (-32602)", params, got.Error)
				}
			}
			if got := c.send("skills/list", `{"cursor":"x"}`, true); got.Error == nil || got.Error.Code != -32602 {
				t.Errorf("skills/list with a cursor it never gave: %+v, want invalid params", got.Error)
			}
		})
	}
}

// The generated skill is each caller's own: alice, who may pay, reads of
// pay's approval and rate; bob, who may not, reads nothing of pay. The two
// entries differ in digest, and each read matches its own entry.
func TestMCPSkillsGeneratedPerCaller(t *testing.T) {
	t.Parallel()
	srv := serve(t, skillsRegistry(t))
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			texts := map[string]string{}
			digests := map[string]string{}
			for _, who := range []string{"alice", "bob"} {
				c := newSkillsClient(t, srv.URL, who+"-secret", version)
				got := c.send("skills/get", `{"uri":"skill://carmy/tool-rules/SKILL.md"}`, true)
				if got.Error != nil || got.Result.Skill == nil {
					t.Fatalf("%s: skills/get: %+v", who, got.Error)
				}
				text, _ := c.read("skill://carmy/tool-rules/SKILL.md")
				if digest(text) != got.Result.Skill.Resources[0].Digest {
					t.Errorf("%s: the generated SKILL.md read does not match its entry's digest", who)
				}
				texts[who], digests[who] = text, got.Result.Skill.Resources[0].Digest
			}
			for _, want := range []string{"`pay` needs a person's approval", "`pay`: 3 times per minute", "carmy/request_id", "| `notes` | read |"} {
				if !strings.Contains(texts["alice"], want) {
					t.Errorf("alice's rules lack %q:\n%s", want, texts["alice"])
				}
			}
			if strings.Contains(texts["bob"], "pay") || !strings.Contains(texts["bob"], "`notes`") {
				t.Errorf("bob's rules must name notes and never pay:\n%s", texts["bob"])
			}
			if digests["alice"] == digests["bob"] {
				t.Error("alice and bob got one digest for different rules")
			}
		})
	}
}

// Over stdio the client's one identity reads the skills: skills/list in a
// session, and its front matter is the SKILL.md's.
func TestMCPSkillsStdio(t *testing.T) {
	t.Parallel()
	reg := skillsRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- reg.ServeStdio(ctx, inR, outW); _ = outW.Close() }()
	t.Cleanup(func() { _ = inW.Close(); cancel(); <-served })
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() skillsAnswer {
		if !lines.Scan() {
			t.Fatal("no answer")
		}
		var a skillsAnswer
		if err := json.Unmarshal(lines.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	next()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"skills/list"}`)
	got := next()
	if got.Error != nil || len(got.Result.Skills) != 3 || got.Result.Skills[2].Frontmatter["description"] != "Follow the team's Git conventions" {
		t.Fatalf("skills/list over stdio: %+v %+v", got.Result, got.Error)
	}
}

// The skills extension is declared, with the resources its files are
// read through, only by a registry that serves skills.
func TestMCPSkillsCapability(t *testing.T) {
	t.Parallel()
	for _, serves := range []bool{true, false} {
		b := carmy.New().Tool(carmy.Tool(func(carmy.Context, struct{}) (string, error) { return "", nil }, carmy.Read, carmy.Name("noop"), carmy.Register(false)))
		if serves {
			b.Skills(nil)
		}
		s := singleClient(t, build(t, b), "memory", "", nil)
		caps := s.InitializeResult().Capabilities
		_, declared := caps.Extensions["io.modelcontextprotocol/skills"]
		if declared != serves || serves && caps.Resources == nil {
			t.Errorf("Skills used %v: extension declared %v, resources %v", serves, declared, caps.Resources)
		}
		if !serves {
			continue
		}
		res, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "skill://carmy/tool-rules/SKILL.md"})
		if err != nil || !strings.Contains(res.Contents[0].Text, "`noop`") {
			t.Errorf("the generated skill alone: %v", err)
		}
	}
}

// A bad skills folder fails Build, each problem naming its file.
func TestBuildSkillsFolder(t *testing.T) {
	t.Parallel()
	md := func(front string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("---\n" + front + "\n---\nbody\n")}
	}
	tests := []struct {
		name   string
		folder fstest.MapFS
		file   string
		says   string
	}{
		{"no SKILL.md", fstest.MapFS{"docs/guide.md": {Data: []byte("x")}}, "docs/guide.md", "belongs to no skill"},
		{"no front matter", fstest.MapFS{"a/SKILL.md": {Data: []byte("# A\n")}}, "a/SKILL.md", "does not begin with front matter"},
		{"front matter never ends", fstest.MapFS{"a/SKILL.md": {Data: []byte("---\nname: a\n")}}, "a/SKILL.md", "never ends"},
		{"not YAML", fstest.MapFS{"a/SKILL.md": md("name: [a")}, "a/SKILL.md", "not YAML"},
		{"no description", fstest.MapFS{"a/SKILL.md": md("name: a")}, "a/SKILL.md", "no description"},
		{"no name", fstest.MapFS{"a/SKILL.md": md("description: d")}, "a/SKILL.md", "no name"},
		{"name with capitals", fstest.MapFS{"Git/SKILL.md": md("name: Git\ndescription: d")}, "Git/SKILL.md", "naming rules"},
		{"name with two hyphens", fstest.MapFS{"a--b/SKILL.md": md("name: a--b\ndescription: d")}, "a--b/SKILL.md", "naming rules"},
		{"name not the directory's", fstest.MapFS{"a/SKILL.md": md("name: b\ndescription: d")}, "a/SKILL.md", "not its directory's name"},
		{"SKILL.md at the root", fstest.MapFS{"SKILL.md": md("name: a\ndescription: d")}, "SKILL.md", "root of the skills folder"},
		{"file too big", fstest.MapFS{"a/SKILL.md": md("name: a\ndescription: d"), "a/big.bin": {Data: make([]byte, 16<<20)}}, "a/big.bin", "16777216 bytes at most"},
		{"the generated skill's place", fstest.MapFS{"carmy/tool-rules/SKILL.md": md("name: tool-rules\ndescription: d")}, "carmy/tool-rules/SKILL.md", "generated skill"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := carmy.New().Skills(tt.folder).Build()
			var be *carmy.BuildError
			if !errors.As(err, &be) || be.Site != tt.file || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), tt.file) {
				t.Errorf("Build: %v; want a BuildError naming %s that says %q", err, tt.file, tt.says)
			}
		})
	}
}

// A long list comes in pages, each skill on one page only, the last
// without a cursor.
func TestMCPSkillsPages(t *testing.T) {
	t.Parallel()
	folder := fstest.MapFS{}
	for i := range 150 {
		name := fmt.Sprintf("skill-%03d", i)
		folder[name+"/SKILL.md"] = &fstest.MapFile{Data: []byte("---\nname: " + name + "\ndescription: d\n---\n")}
	}
	srv := serve(t, build(t, carmy.New().Skills(folder)))
	c := newSkillsClient(t, srv.URL, "", "2026-07-28")
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		params := ""
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		got := c.send("skills/list", params, true)
		if got.Error != nil {
			t.Fatal(got.Error)
		}
		pages++
		for _, s := range got.Result.Skills {
			if seen[s.URI] {
				t.Errorf("%s on two pages", s.URI)
			}
			seen[s.URI] = true
		}
		if cursor = got.Result.NextCursor; cursor == "" {
			break
		}
	}
	if pages != 2 || len(seen) != 151 {
		t.Errorf("%d pages, %d skills; want 2 pages of the 150 skills and the generated one", pages, len(seen))
	}
}
