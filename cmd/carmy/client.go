package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/httpapi"
)

const toolsUsage = `usage: carmy tools [flags] URL

carmy tools lists the tools of a running carmy server that the caller
(the token's holder) may call: GET URL/tools of the HTTP API. URL is where
the server's handler is mounted, such as http://127.0.0.1:3000. It prints a
table of each tool's name, effect, flags (idempotent, parallel-safe, needs
confirmation), the permissions a call needs when some tool requires any,
and description; -json prints the server's answer, the tools' metadata
with their schemas, as it came.

Flags:
`

const callUsage = `usage: carmy call [flags] URL TOOL [JSON]

carmy call calls a tool of a running carmy server: POST URL/tools/TOOL with
the JSON input as the body. Without JSON the input is {}; with JSON "-" it
is read from standard input.

On success it prints the tool's output, indented. On failure it prints the
error's code and message, and for invalid input each field's path and
message, to standard error, and exits with status 1. With -json it prints
the server's answer as it came, to standard output, in both cases.

With -async the call starts as a task (Prefer: respond-async): it prints
the task, which outlives the request, and carmy tasks follows it. A tool
that forbids tasks answers as without -async.

Flags:
`

// clientFlags are the flags tools and call share.
type clientFlags struct {
	json    bool
	token   string
	timeout time.Duration
}

// defaults fills in what the flags left unset.
func (c *clientFlags) defaults() {
	if c.token == "" {
		c.token = os.Getenv("CARMY_TOKEN")
	}
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.json, "json", false, "print the server's JSON answer as it came")
	// The default is applied after parsing: a help text must not show it.
	fs.StringVar(&c.token, "token", "", "bearer `token` sent in the Authorization header (default $CARMY_TOKEN)")
	fs.DurationVar(&c.timeout, "timeout", 0, "give up after this `duration` (default: wait for the server)")
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, and returns the positional ones. "--" ends the
// flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newFlagSet(name, usage string, stdout, stderr io.Writer, args []string) (*flag.FlagSet, bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if isHelp(args) {
		fs.SetOutput(stdout)
		return fs, true
	}
	return fs, false
}

// parseClient parses the flags of a command that talks to a server, with
// those extra adds, and returns the positional arguments; done reports
// that the command ends there (its help, or a usage mistake) with exit
// status code.
func parseClient(name, usage string, cf *clientFlags, stdout, stderr io.Writer, args []string, extra func(*flag.FlagSet)) (fs *flag.FlagSet, pos []string, code int, done bool) {
	fs, help := newFlagSet(name, usage, stdout, stderr, args)
	cf.register(fs)
	if extra != nil {
		extra(fs)
	}
	if help {
		fs.Usage()
		return fs, nil, 0, true
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return fs, nil, 2, true
	}
	cf.defaults()
	return fs, pos, 0, false
}

func runTools(args []string, stdout, stderr io.Writer) int {
	var cf clientFlags
	fs, pos, code, done := parseClient("carmy tools", toolsUsage, &cf, stdout, stderr, args, nil)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "carmy tools: want one URL, got %d arguments\n", len(pos))
		fs.Usage()
		return 2
	}
	endpoint, err := endpointURL(pos[0], "tools")
	if err != nil {
		fmt.Fprintf(stderr, "carmy tools: %v\n", err)
		return 2
	}
	ctx, stop := cf.context()
	defer stop()
	status, body, err := cf.do(ctx, http.MethodGet, endpoint, nil, nil)
	if err != nil {
		fmt.Fprintf(stderr, "carmy tools: %v\n", err)
		return 1
	}
	if cf.json {
		stdout.Write(withNewline(body))
		if status != http.StatusOK {
			return 1
		}
		return 0
	}
	if status != http.StatusOK {
		printFailure(stderr, "carmy tools", status, body)
		cf.authHint(stderr, status)
		return 1
	}
	var tools []carmy.ToolMetadata
	if err := json.Unmarshal(body, &tools); err != nil {
		fmt.Fprintf(stderr, "carmy tools: the server's answer is not a list of tools: %v\n", err)
		return 1
	}
	printTools(stdout, tools)
	return 0
}

// printTools writes the tools as a table: name, effect, flags and the
// first line of the description.
func printTools(w io.Writer, tools []carmy.ToolMetadata) {
	if len(tools) == 0 {
		fmt.Fprintln(w, "The server has no tools that this caller may call.")
		return
	}
	slices.SortFunc(tools, func(a, b carmy.ToolMetadata) int { return strings.Compare(a.Name, b.Name) })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// The permissions get a column only on a server whose tools need some.
	requires := slices.ContainsFunc(tools, func(t carmy.ToolMetadata) bool { return len(t.Requires) > 0 })
	if requires {
		fmt.Fprintln(tw, "NAME\tEFFECT\tFLAGS\tREQUIRES\tDESCRIPTION")
	} else {
		fmt.Fprintln(tw, "NAME\tEFFECT\tFLAGS\tDESCRIPTION")
	}
	for _, t := range tools {
		if requires {
			perms := strings.Join(t.Requires, " ")
			if perms == "" {
				perms = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Effect, toolFlags(t), perms, summary(t.Description, 72))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Effect, toolFlags(t), summary(t.Description, 72))
	}
	tw.Flush()
}

// toolFlags sums up the rules a tool's calls run under.
func toolFlags(t carmy.ToolMetadata) string {
	var f []string
	if t.Idempotent {
		f = append(f, "idempotent")
	}
	if t.ParallelSafe {
		f = append(f, "parallel")
	}
	if t.Confirmation == carmy.ConfirmationRequired {
		f = append(f, "confirm")
	}
	if len(f) == 0 {
		return "-"
	}
	return strings.Join(f, ",")
}

// summary returns the first line of a description, cut to max runes.
func summary(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = strings.TrimSpace(string(r[:max-1])) + "…"
	}
	return s
}

func runCall(args []string, stdout, stderr io.Writer) int {
	var cf clientFlags
	var key *string
	var async *bool
	fs, pos, code, done := parseClient("carmy call", callUsage, &cf, stdout, stderr, args, func(fs *flag.FlagSet) {
		key = fs.String("idempotency-key", "", "send this `key` as the Idempotency-Key header: a repeat of the call with the same key and input replays the first outcome")
		async = fs.Bool("async", false, "start the call as a task and print the task (see carmy tasks)")
	})
	if done {
		return code
	}
	if len(pos) < 2 || len(pos) > 3 {
		fmt.Fprintf(stderr, "carmy call: want URL TOOL [JSON], got %d arguments\n", len(pos))
		fs.Usage()
		return 2
	}
	endpoint, err := endpointURL(pos[0], "tools", pos[1])
	if err != nil {
		fmt.Fprintf(stderr, "carmy call: %v\n", err)
		return 2
	}
	input := []byte("{}")
	switch {
	case len(pos) == 3 && pos[2] != "-":
		input = []byte(pos[2])
	case len(pos) == 3:
		if input, err = io.ReadAll(os.Stdin); err != nil {
			fmt.Fprintf(stderr, "carmy call: reading the input: %v\n", err)
			return 1
		}
		if len(bytes.TrimSpace(input)) == 0 {
			input = []byte("{}")
		}
	}
	if !json.Valid(input) {
		var v any
		err := json.Unmarshal(input, &v)
		fmt.Fprintf(stderr, "carmy call: the input is not valid JSON: %v\n", err)
		return 2
	}
	header := http.Header{"Content-Type": {"application/json"}}
	if *key != "" {
		header.Set("Idempotency-Key", *key)
	}
	if *async {
		header.Set("Prefer", "respond-async")
	}
	ctx, stop := cf.context()
	defer stop()
	status, body, err := cf.do(ctx, http.MethodPost, endpoint, header, input)
	if err != nil {
		fmt.Fprintf(stderr, "carmy call: %v\n", err)
		return 1
	}
	if status == http.StatusAccepted {
		if cf.json {
			stdout.Write(withNewline(body))
			return 0
		}
		return printStarted(stdout, stderr, pos[0], body)
	}
	// A 200 is the call's result; any other status is a failure
	// (printFailure reads its document).
	var res httpapi.Result
	ok := status == http.StatusOK && json.Unmarshal(body, &res) == nil
	if cf.json {
		stdout.Write(withNewline(body))
		if !ok {
			return 1
		}
		return 0
	}
	if !ok {
		printFailure(stderr, "carmy call", status, body)
		cf.authHint(stderr, status)
		return 1
	}
	var out bytes.Buffer
	if len(res.Output) == 0 || json.Indent(&out, res.Output, "", "  ") != nil {
		out.Reset()
		out.Write(res.Output)
	}
	stdout.Write(withNewline(out.Bytes()))
	if res.Replayed {
		fmt.Fprintf(stderr, "(replayed: the recorded outcome of execution %s)\n", res.ExecutionID)
	}
	return 0
}

// authHint tells, after a 401, how this command sends a bearer token:
// the server's own message cannot know the command's flags.
func (c *clientFlags) authHint(w io.Writer, status int) {
	if status != http.StatusUnauthorized {
		return
	}
	if c.token == "" {
		fmt.Fprintln(w, "The server wants a bearer token: pass --token <token>, or set CARMY_TOKEN.")
		return
	}
	fmt.Fprintln(w, "The server refused the bearer token sent (from --token or CARMY_TOKEN): check it against the server's tokens.")
}

// printFailure writes a failed answer: a carmy error with its fields and
// details, or the status and the start of the body of anything else.
func printFailure(w io.Writer, prog string, status int, body []byte) {
	var res httpapi.Failure
	if err := json.Unmarshal(body, &res); err != nil || res.Error == nil || res.Error.Code == "" {
		text := strings.TrimSpace(string(body))
		if len(text) > 500 {
			text = text[:500] + "…"
		}
		fmt.Fprintf(w, "%s: the server answered %d %s", prog, status, http.StatusText(status))
		if text != "" {
			fmt.Fprintf(w, ": %s", text)
		}
		fmt.Fprintln(w)
		return
	}
	printError(w, res.Error)
}

// printError writes a carmy error as a person reads it: its code and
// message, the fields at fault, its details, and whether it is retryable.
func printError(w io.Writer, e *httpapi.Error) {
	fmt.Fprintf(w, "error: %s: %s\n", e.Code, e.Message)
	for _, f := range e.Fields {
		path := f.Path
		if path == "" {
			path = "(input)"
		}
		fmt.Fprintf(w, "  %s: %s\n", path, f.Message)
	}
	for _, k := range slices.Sorted(maps.Keys(e.Details)) {
		v, err := json.Marshal(e.Details[k])
		if err != nil {
			v = []byte(fmt.Sprint(e.Details[k]))
		}
		fmt.Fprintf(w, "  details.%s: %s\n", k, v)
	}
	if e.Retryable {
		fmt.Fprintln(w, "  (retryable: the same call may succeed later)")
	}
}

// endpointURL joins a server's base URL and path elements, each escaped.
func endpointURL(base string, elems ...string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("bad URL %q: %v", base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("bad URL %q: want http://host[:port][/path] or https://…", base)
	}
	// A URL given with the endpoint itself is taken as meant.
	raw := strings.TrimSuffix(strings.TrimSuffix(u.EscapedPath(), "/"), "/tools")
	for _, e := range elems {
		raw += "/" + url.PathEscape(e)
	}
	if u.Path, err = url.PathUnescape(raw); err != nil {
		return "", err
	}
	u.RawPath = raw
	return u.String(), nil
}

func (c *clientFlags) context() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	if c.timeout <= 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	return ctx, func() { cancel(); stop() }
}

// do sends a request and returns the answer's status and body.
func (c *clientFlags) do(ctx context.Context, method, endpoint string, header http.Header, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if header != nil {
		req.Header = header
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "carmy-cli")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, nil, fmt.Errorf("no answer within %v", c.timeout)
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %v", err)
	}
	return resp.StatusCode, b, nil
}

func withNewline(b []byte) []byte {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return append(b, '\n')
	}
	return b
}
