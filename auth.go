package carmy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Identity is what the host knows about a caller: who it is and what it
// may do. Callers never choose their own identity; an [Authenticator]
// derives it from the request.
type Identity struct {
	Principal   string
	Session     string
	Permissions []string
	Metadata    map[string]string
}

// Authenticator turns an HTTP request into the caller's [Identity]. An
// error refuses the request: a [*Error] keeps its code, any other error is
// [CodeUnauthenticated]. It must be safe for concurrent use.
type Authenticator interface {
	Authenticate(r *http.Request) (Identity, error)
}

// AuthenticatorFunc adapts a function to [Authenticator].
type AuthenticatorFunc func(r *http.Request) (Identity, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(r *http.Request) (Identity, error) { return f(r) }

// Token is one bearer token that [BearerTokens] accepts, known by the hex
// SHA-256 of the token so that the secret itself is never stored.
type Token struct {
	SHA256      string   `toml:"sha256"`
	Principal   string   `toml:"principal"`
	Permissions []string `toml:"permissions"`
}

// HashToken returns the hex SHA-256 of a token, as [Token.SHA256] holds it.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// BearerTokens returns an [Authenticator] that accepts the given tokens in
// an "Authorization: Bearer" header. Every known hash is compared, in
// constant time, so a response reveals nothing about how close a guess
// came. It panics on a malformed hash, which is a configuration mistake.
// One hash given for two principals, or with two sets of permissions, is
// a [Builder.Build] error; used without a builder, such a token is
// refused.
func BearerTokens(tokens ...Token) Authenticator {
	b := bearer{}
	for _, t := range tokens {
		h, err := hex.DecodeString(t.SHA256)
		if err != nil || len(h) != sha256.Size {
			panic(fmt.Sprintf("carmy: BearerTokens: token of %q: sha256 must be 64 hex digits", t.Principal))
		}
		b.tokens = append(b.tokens, bearerToken{hash: [sha256.Size]byte(h), Token: t})
	}
	return b
}

type bearer struct{ tokens []bearerToken }

// validate reports a hash given twice with different identities, which
// would let whoever holds the token be either.
func (b bearer) validate() error {
	for i, t := range b.tokens {
		for _, u := range b.tokens[:i] {
			if t.hash == u.hash && !t.same(u.Token) {
				return fmt.Errorf("BearerTokens: the token of %q is also the token of %q; give each principal its own token", t.Principal, u.Principal)
			}
		}
	}
	return nil
}

func (t Token) same(u Token) bool {
	return t.Principal == u.Principal && slices.Equal(t.Permissions, u.Permissions)
}

// authorization returns the request's one Authorization header.
func authorization(r *http.Request) (string, *Error) {
	v := r.Header.Values("Authorization")
	if len(v) > 1 {
		return "", Errorf(CodeUnauthenticated, "send one Authorization header, not %d", len(v))
	}
	if len(v) == 0 {
		return "", nil
	}
	return v[0], nil
}

type bearerToken struct {
	hash [sha256.Size]byte
	Token
}

func (b bearer) Authenticate(r *http.Request) (Identity, error) {
	header, e := authorization(r)
	if e != nil {
		return Identity{}, e
	}
	scheme, secret, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return Identity{}, Errorf(CodeUnauthenticated, "send a bearer token: Authorization: Bearer <token>")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	match, ambiguous := -1, false
	for i, t := range b.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.hash[:]) == 1 {
			ambiguous = ambiguous || (match >= 0 && !t.same(b.tokens[match].Token))
			match = i
		}
	}
	if match < 0 || ambiguous {
		return Identity{}, Errorf(CodeUnauthenticated, "the bearer token is not valid")
	}
	t := b.tokens[match]
	return Identity{Principal: t.Principal, Permissions: t.Permissions}, nil
}
