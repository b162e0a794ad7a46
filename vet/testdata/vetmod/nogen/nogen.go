package nogen

import (
	"context"

	"github.com/carmy-dev/carmy"
)

// Echo is the input and output of echo.
type Echo struct {
	// Text to send back.
	Text string `json:"text"`
}

var echoTool = carmy.Tool(echo, carmy.None) // want `^carmy: the doc comments of this package's tools \(2\) are not registered: carmy_gen.go is missing`

func echo(ctx context.Context, in Echo) (Echo, error) { return in, nil }
