package policy

import (
	"strings"
	"testing"
)

var testTools = []Tool{
	{Name: "transfer", Effect: "external_write", Requires: []string{"bank"}, InputSchema: []byte(`{"type":"object","properties":{"amount":{"type":"number"},"to":{"type":"string"},"count":{"type":"integer","minimum":0,"maximum":100}},"required":["amount","to","count"],"additionalProperties":false}`)},
	{Name: "restart", Effect: "destructive", InputSchema: []byte(`{"type":"object","properties":{"env":{"type":"string"}},"required":["env"],"additionalProperties":false}`)},
}

func TestParseAndDecide(t *testing.T) {
	cat := NewCatalog(testTools)
	src := `@id("base")
permit(principal, action, resource);

@id("big")
@reason("transfers above 1000 need the treasury")
forbid(principal, action == Action::"call", resource == Tool::"transfer")
when { context.input has amount && context.input.amount.greaterThan(decimal("1000.0")) };

@id("prod")
@confirm("")
permit(principal, action == Action::"call", resource == Tool::"restart")
when { context.input.env == "prod" && principal.hasTag("team") && principal.getTag("team") == "oncall" };
`
	s, err := Parse(cat, "p.cedar", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	d := s.Decide(cat, Request{Action: Call, Principal: "a", Tool: "transfer", Input: []byte(`{"amount":1500.5,"to":"x","count":1}`), Door: "go"})
	if d.Allow || d.Reason != "transfers above 1000 need the treasury" || strings.Join(d.Policies, ",") != "big" {
		t.Errorf("%+v", d)
	}
	d = s.Decide(cat, Request{Action: Call, Principal: "a", Tool: "transfer", Input: []byte(`{"amount":15,"to":"x","count":1}`), Door: "go"})
	if !d.Allow {
		t.Errorf("%+v", d)
	}
	d = s.Decide(cat, Request{Action: Call, Principal: "a", Metadata: map[string]string{"team": "oncall"}, Tool: "restart", Input: []byte(`{"env":"prod"}`), Door: "go"})
	if !d.Allow || !d.Confirm {
		t.Errorf("%+v", d)
	}
	_, err = Parse(cat, "p.cedar", []byte("permit(principal, action, resource == Tool::\"nope\");\npermit(principal, action, resource == Tool::\"restart\") when { context.input.amount == 1 };\n@id(\"x\")permit(principal,action,resource);\n@id(\"x\")permit(principal,action,resource);"))
	t.Log(err)
	_, err = Parse(cat, "p.cedar", []byte("permit(principal, action, resource);\n\nforbid(principal, action = Action::\"x\", resource) when { 1 + };"))
	t.Log(err)
	sch, _ := cat.Schema("transfer")
	t.Log(sch)
}
