package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/carmy-dev/carmy/internal/console"
)

const approvalsUsage = `usage: carmy approvals [flags]
       carmy approvals approve ID
       carmy approvals deny ID

carmy approvals lets the person at a terminal decide the calls that wait
for their approval on the carmy servers they run on this machine: a server
over stdio that an agent client started, whose client cannot ask them, or
a local HTTP server without authentication. Each such server writes its
console's link, with the secret that approves calls, to a file only its
user can read ($XDG_RUNTIME_DIR, else the temporary directory, named
carmy-console-*.url) and removes it when it stops; carmy approvals reads
those files, of this user only.

Without arguments it lists the pending approvals: each one's id, tool,
caller and expiry, and the input exactly as it will run. "approve ID" and
"deny ID" decide one; once approved, the call runs when the agent makes it
again, with the same input. A denial is final: the call stays refused
until the approval expires.

Flags:
`

func runApprovals(args []string, stdout, stderr io.Writer) int {
	fs, help := newFlagSet("carmy approvals", approvalsUsage, stdout, stderr, args)
	asJSON := fs.Bool("json", false, "list the pending approvals as JSON, one array")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on a server that does not answer within this `duration`")
	if help {
		fs.Usage()
		return 0
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch {
	case len(pos) == 0:
		return listApprovals(ctx, *asJSON, stdout, stderr)
	case len(pos) == 2 && (pos[0] == "approve" || pos[0] == "deny"):
		return decideApproval(ctx, pos[0], pos[1], stdout, stderr)
	}
	fmt.Fprintf(stderr, "carmy approvals: want no argument, \"approve ID\" or \"deny ID\"; got %q\n", strings.Join(pos, " "))
	fs.Usage()
	return 2
}

// approval is an approval as the servers' approvals API shows it.
type approval struct {
	ID        string    `json:"id"`
	Tool      string    `json:"tool"`
	Principal string    `json:"principal"`
	Status    string    `json:"status"`
	Expires   time.Time `json:"expires"`
	Approver  string    `json:"approver,omitempty"`
	// Text is the input as a person is shown it: made by the server, with
	// exact numbers and every character that could disguise text escaped.
	Text string `json:"text"`
	// Server is the server's URL, which the API does not say.
	Server string `json:"server"`
}

// localServer is a server found through its console file, with its
// pending approvals.
type localServer struct {
	console.Local
	pending []approval
}

// send asks a server's approvals API, with its console secret, for path
// and decodes the answer into v; it returns the answer's status.
func (s localServer) send(ctx context.Context, method, path string, v any) (int, error) {
	var payload io.Reader
	if method == http.MethodPost {
		payload = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, s.Base+path, payload)
	if err != nil {
		return 0, err
	}
	req.Header.Set(console.Header, s.Secret)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "carmy-cli")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return res.StatusCode, err
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error *wireError `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != nil {
			return res.StatusCode, fmt.Errorf("%s: %s", e.Error.Code, e.Error.Message)
		}
		return res.StatusCode, fmt.Errorf("the server answered %d %s", res.StatusCode, http.StatusText(res.StatusCode))
	}
	return res.StatusCode, json.Unmarshal(body, v)
}

// servers returns the local servers that answer; those that do not (a
// file a killed server left behind) are reported on stderr.
func servers(ctx context.Context, stderr io.Writer) []localServer {
	found, errs := console.Find()
	for _, err := range errs {
		fmt.Fprintf(stderr, "carmy approvals: %v\n", err)
	}
	var out []localServer
	for _, l := range found {
		s := localServer{Local: l}
		_, err := s.send(ctx, http.MethodGet, "/approvals?status=pending", &s.pending)
		if errors.Is(err, syscall.ECONNREFUSED) {
			// Nothing listens there: the server stopped without removing
			// its file (it was killed), and its secret died with it.
			if os.Remove(l.File) == nil {
				fmt.Fprintf(stderr, "carmy approvals: removed %s, left by a server that no longer runs (%s)\n", l.File, l.Base)
			}
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "carmy approvals: %s (from %s): %v\n", l.Base, l.File, err)
			continue
		}
		// The list summarizes; each approval's input comes with the
		// approval itself, and a person decides only on what they read.
		for i, a := range s.pending {
			var full approval
			if _, err := s.send(ctx, http.MethodGet, "/approvals/"+url.PathEscape(a.ID), &full); err != nil {
				fmt.Fprintf(stderr, "carmy approvals: %s: approval %s: %v\n", l.Base, a.ID, err)
				continue
			}
			s.pending[i].Text = full.Text
		}
		out = append(out, s)
	}
	return out
}

// pendingOf lists the pending approvals of the servers, each once (a
// server that listens on HTTP and serves stdio too has two consoles),
// newest first.
func pendingOf(srvs []localServer) []approval {
	var all []approval
	seen := map[string]bool{}
	for _, s := range srvs {
		for _, a := range s.pending {
			if !seen[a.ID] {
				seen[a.ID] = true
				a.Server = s.Base
				all = append(all, a)
			}
		}
	}
	return all
}

func listApprovals(ctx context.Context, asJSON bool, stdout, stderr io.Writer) int {
	srvs := servers(ctx, stderr)
	all := pendingOf(srvs)
	if asJSON {
		b, _ := json.MarshalIndent(append([]approval{}, all...), "", "  ")
		stdout.Write(withNewline(b))
		return 0
	}
	if len(srvs) == 0 {
		fmt.Fprintf(stdout, "No carmy server of this user runs on this machine with a console (looked for %s).\n", consoleFiles())
		return 0
	}
	if len(all) == 0 {
		fmt.Fprintf(stdout, "No call waits for approval on the %d local carmy server(s).\n", len(srvs))
		return 0
	}
	for i, a := range all {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printApproval(stdout, a)
	}
	fmt.Fprintln(stdout, "\nDecide with: carmy approvals approve ID, or carmy approvals deny ID")
	return 0
}

// printApproval writes one approval: what runs, who asks, until when.
func printApproval(w io.Writer, a approval) {
	who := a.Principal
	if who == "" {
		who = "anonymous"
	}
	fmt.Fprintf(w, "%s  %s\n", a.ID, a.Tool)
	fmt.Fprintf(w, "  requested by %s, on %s; expires %s\n", who, a.Server, a.Expires.Local().Format(time.DateTime))
	fmt.Fprintln(w, "  input (exactly what will run):")
	for line := range strings.SplitSeq(a.Text, "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
}

func decideApproval(ctx context.Context, decision, id string, stdout, stderr io.Writer) int {
	srvs := servers(ctx, stderr)
	i := slices.IndexFunc(srvs, func(s localServer) bool {
		var a approval
		_, err := s.send(ctx, http.MethodGet, "/approvals/"+url.PathEscape(id), &a)
		return err == nil
	})
	if i < 0 {
		fmt.Fprintf(stderr, "carmy approvals: no local carmy server has approval %q; run \"carmy approvals\" to list the pending ones\n", id)
		return 1
	}
	var a approval
	if _, err := srvs[i].send(ctx, http.MethodPost, "/approvals/"+url.PathEscape(id)+"/"+decision, &a); err != nil {
		fmt.Fprintf(stderr, "carmy approvals: %s %s: %v\n", decision, id, err)
		return 1
	}
	a.Server = srvs[i].Base
	printApproval(stdout, a)
	if a.Status == "approved" {
		fmt.Fprintln(stdout, "Approved: the call runs when the agent makes it again, with this input, before it expires.")
	} else {
		fmt.Fprintln(stdout, "Denied: the call stays refused until it expires.")
	}
	return 0
}

// consoleFiles names where the console files are looked for.
func consoleFiles() string {
	return console.Dir() + string(os.PathSeparator) + "carmy-console-*.url"
}
