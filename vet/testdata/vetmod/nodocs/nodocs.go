package nodocs

import (
	"context"
	"time"

	"github.com/carmy-dev/carmy"
)

type Now struct {
	Zone string `json:"zone"`
}

var nowTool = carmy.Tool(now, carmy.Read)

func now(ctx context.Context, in Now) (time.Time, error) { return time.Now(), nil }
