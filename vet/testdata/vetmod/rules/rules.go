// Package rules declares a tool whose rules the schema cannot all state.
package rules

import (
	"context"
	"time"

	"github.com/carmy-dev/carmy"

	"example.com/vetmod/rules/shared"
)

type Signup struct {
	User     string        `json:"user" validate:"required,alphanum"` // want `^carmy: user: validate rule "alphanum" \(must contain only ASCII letters and digits\) cannot reach the schema: .* or say it in the field's description and mark the field //carmy:ignore rule`
	Password string        `json:"password" validate:"min=8"`
	Confirm  string        `json:"confirm" validate:"eqfield=Password"` // want `^carmy: confirm: validate rule "eqfield=Password" \(must equal field Password\)`
	Site     string        `json:"site,omitempty" validate:"omitempty,url"`
	Wait     time.Duration `json:"wait" validate:"max=1h"` // want `^carmy: wait: validate rule "max=1h" \(must be at most 1h\)`
	Pets     []Pet         `json:"pets" validate:"dive"`
	Count    int           `json:"count" validate:"ne=0"`            // want `^carmy: count: validate rule "ne=0" \(must not be 0\)`
	Codes    []string      `json:"codes" validate:"min=1,dive,ne=x"` // want `^carmy: codes: validate rule "ne=x" \(must not be "x"\)`
	//carmy:ignore rule the field's description says it
	Nick string `json:"nick" validate:"lowercase" jsonschema:"description=A nickname in lowercase"`
	Slug string `json:"slug" validate:"ascii"` //carmy:ignore rule checked again by the tool
	// A directive for another check leaves this one reported.
	//carmy:ignore tool
	Team  string        `json:"team" validate:"uppercase"` // want `^carmy: team: validate rule "uppercase" \(must be uppercase\)`
	Other shared.Shared `json:"other"`
	// Pointers: nil skips the rules only after omitempty or omitnil.
	Note     *string `json:"note" validate:"max=200"` // want `^carmy: note: validate:"max=200": carmy lets a nil pointer through \(null or absent, as every pointer may be\) without its rules, where the validator would check "max=200" on nil`
	Opt      *string `json:"opt" validate:"omitempty,max=200"`
	Req      *int    `json:"req" validate:"required,min=1"`
	Elems    []*int  `json:"elems" validate:"dive,min=1"` // want `^carmy: elems: validate:"dive,min=1": carmy lets a nil pointer through`
	OkElems  []*int  `json:"ok_elems" validate:"dive,omitnil,min=1"`
	DiveOnly []*Pet  `json:"dive_only" validate:"dive"`
}

type Pet struct {
	Kind string `json:"kind" validate:"oneof=cat dog|startswith=x"` // want `^carmy: pets\[\]\.kind: validate rule "oneof=cat dog\|startswith=x" \(must be one of "cat", "dog", or must start with "x"\)`
}

// The comments here are not descriptions; no carmy_gen.go is wanted.
//
//carmy:ignore generate
var signupTool = carmy.Tool(signup, carmy.Write) // want `^carmy: other\.code: validate rule "alpha" \(must contain only ASCII letters\)`

// The rules of another package's field are reported at the call, where a
// directive silences them.
var quietTool = carmy.Tool(quiet, carmy.Write) //carmy:ignore rule shared's rules are in the description

//carmy:ignore rule
var quietToo = carmy.Tool(quiet, carmy.Write, carmy.Name("quiet_too"))

// A directive naming no check is a finding itself.
//
//carmy:ignore rules // want `^carmy: //carmy:ignore names no check \("rules"\)`
var typo = carmy.Tool(quiet, carmy.Write, carmy.Name("typo")) // want `^carmy: other\.code: validate rule "alpha"`

func signup(ctx context.Context, in Signup) error { return nil }

type Quiet struct {
	Other shared.Shared `json:"other"`
}

func quiet(ctx context.Context, in Quiet) error { return nil }
