package carmy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
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

type bearerToken struct {
	hash [sha256.Size]byte
	Token
}

func (b bearer) Authenticate(r *http.Request) (Identity, error) {
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return Identity{}, Errorf(CodeUnauthenticated, "send a bearer token: Authorization: Bearer <token>")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	match := -1
	for i, t := range b.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.hash[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return Identity{}, Errorf(CodeUnauthenticated, "the bearer token is not valid")
	}
	t := b.tokens[match]
	return Identity{Principal: t.Principal, Permissions: t.Permissions}, nil
}
