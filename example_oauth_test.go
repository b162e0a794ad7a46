package carmy_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/carmy-dev/carmy"
)

// A server that accepts the access tokens of the organisation's OpenID
// provider: callers run as their token's sub, with its scopes as
// permissions. It needs the provider, so it is not run here.
func ExampleOAuth() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	auth, err := carmy.OAuth(start, carmy.OAuthConfig{
		Issuer:   "https://auth.example.com/realms/tools",
		Audience: "https://tools.example.com/mcp",
		Scopes:   []string{"tools"},
	})
	if err != nil {
		log.Fatal(err) // the provider cannot be reached, or the configuration is wrong
	}
	// With an authenticator, a non-loopback address is allowed.
	if err := carmy.App().Authenticate(auth).Listen(ctx, ":8080"); err != nil {
		log.Fatal(err)
	}
}
