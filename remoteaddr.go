package carmy

import "context"

// remoteAddrKey is the context key of the network address a call came
// from.
type remoteAddrKey struct{}

// withRemoteAddr notes the address a call came from, so that the logs of
// its refusals say who asked.
func withRemoteAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, remoteAddrKey{}, addr)
}

// remoteAddr returns the address noted by withRemoteAddr, or "".
func remoteAddr(ctx context.Context) string {
	addr, _ := ctx.Value(remoteAddrKey{}).(string)
	return addr
}
