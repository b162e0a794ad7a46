package stale

import (
	"context"

	"example.com/vetmod/good/model"
	"github.com/carmy-dev/carmy"
)

// Ping is the input of ping.
type Ping struct {
	// Host to reach.
	Host string `json:"host"`
}

// Pong is the output of ping.
type Pong struct {
	Millis int       `json:"millis"`
	Best   model.Hit `json:"best"`
}

var pingTool = carmy.Tool(ping, carmy.Read) // want `^carmy: carmy_gen.go is out of date \(missing: example.com/vetmod/good/model.Hit and 5 more; changed: example.com/vetmod/stale.Ping.Host; no longer in the source: example.com/vetmod/stale.Gone\); run go generate`

// Reach a host.
func ping(ctx context.Context, in Ping) (Pong, error) { return Pong{}, nil }
