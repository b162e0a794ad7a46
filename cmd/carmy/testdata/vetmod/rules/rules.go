// Package rules declares a tool whose rules the schema cannot all state.
package rules

import (
	"context"
	"time"

	"github.com/carmy-dev/carmy"
)

type Signup struct {
	User     string        `json:"user" validate:"required,alphanum"`
	Password string        `json:"password" validate:"min=8"`
	Confirm  string        `json:"confirm" validate:"eqfield=Password"`
	Site     string        `json:"site,omitempty" validate:"omitempty,url"`
	Wait     time.Duration `json:"wait" validate:"max=1h"`
	Pets     []Pet         `json:"pets" validate:"dive"`
}

type Pet struct {
	Kind string `json:"kind" validate:"oneof=cat dog|startswith=x"`
}

var signupTool = carmy.Tool(signup, carmy.Write) // want `^carmy: user: validate rule "alphanum" cannot reach the schema` `^carmy: confirm: validate rule "eqfield=Password"` `^carmy: wait: validate rule "max=1h"` `^carmy: pets\[\]\.kind: validate rule "oneof=cat dog\|startswith=x"`

func signup(ctx context.Context, in Signup) error { return nil }
