package carmy

import (
	"errors"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// The protected resource metadata (RFC 9728) of the server's root and,
// suffixed with its path, of the MCP endpoint: MCP clients look for the
// latter first.
const (
	wellKnownResource    = "/.well-known/oauth-protected-resource"
	wellKnownResourceMCP = wellKnownResource + "/mcp"
)

// resourceServer is an [Authenticator] that is an OAuth 2.0 resource
// server: [Registry.Handler] publishes its metadata and its refusals tell
// the caller where to get a token.
type resourceServer interface {
	// metadata describes the protected resource at path ("" for the
	// server's root, or "/mcp") as the request reached it.
	metadata(req *http.Request, path string) *oauthex.ProtectedResourceMetadata
	// challenge is the WWW-Authenticate value of a request the
	// authenticator refused with err.
	challenge(req *http.Request, err error) string
}

// mountWellKnown serves the protected resource metadata when the
// authenticator is a resource server.
func (r *Registry) mountWellKnown(mux *http.ServeMux) {
	rs, ok := r.auth.(resourceServer)
	if !ok {
		return
	}
	declared := r.declaredPermissions()
	for pattern, path := range map[string]string{wellKnownResource: "", wellKnownResourceMCP: "/mcp"} {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, req *http.Request) {
			m := rs.metadata(req, path)
			// The permissions tools require are scopes a client may ask for.
			m.ScopesSupported = union(m.ScopesSupported, declared)
			auth.ProtectedResourceMetadataHandler(m).ServeHTTP(w, req)
		})
	}
}

// writeAuthError answers a request its authentication refused; a resource server
// adds its challenge.
func (r *Registry) writeAuthError(w http.ResponseWriter, req *http.Request, err error) {
	if rs, ok := r.auth.(resourceServer); ok {
		w.Header().Set("WWW-Authenticate", rs.challenge(req, err))
	}
	writeError(w, err)
}

// serverOrigin is the scheme and host under which a request reached the
// server.
func (o *oauthAuthenticator) serverOrigin(req *http.Request) string {
	if o.origin != "" {
		return o.origin
	}
	if req.TLS != nil {
		return "https://" + req.Host
	}
	return "http://" + req.Host
}

func (o *oauthAuthenticator) metadata(req *http.Request, path string) *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               o.serverOrigin(req) + path,
		AuthorizationServers:   []string{o.issuer},
		ScopesSupported:        o.scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "carmy",
	}
}

// challenge follows RFC 6750 §3 and RFC 9728 §5.1: the metadata URL of
// the resource asked for, the scopes this server requires, and an error
// code once a token was sent.
func (o *oauthAuthenticator) challenge(req *http.Request, err error) string {
	meta := o.serverOrigin(req) + wellKnownResource
	if req.URL.Path == "/mcp" {
		meta = o.serverOrigin(req) + wellKnownResourceMCP
	}
	params := []string{}
	scope := strings.Join(o.scopes, " ")
	var missing *scopeError
	switch {
	case errors.As(err, &missing):
		params = append(params, `error="insufficient_scope"`)
		scope = strings.Join(missing.missing, " ")
	case req.Header.Get("Authorization") != "":
		params = append(params, `error="invalid_token"`)
		if e := publicError(err); e.Message != "" {
			params = append(params, "error_description="+quoteParam(e.Message))
		}
	}
	if scope != "" {
		params = append(params, "scope="+quoteParam(scope))
	}
	params = append(params, "resource_metadata="+quoteParam(meta))
	return "Bearer " + strings.Join(params, ", ")
}

// quoteParam quotes an auth-param value (RFC 9110 §5.6.4).
func quoteParam(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
