package genkitcarmy_test

import (
	"context"
	"fmt"
	"log"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/adapters/genkitcarmy"
)

type Greet struct {
	Name string `json:"name" validate:"required"`
}

// A Genkit generation calls a carmy tool as the user it acts for. The model
// here is a stand-in that asks for one call, then repeats what the tool
// returned.
func Example() {
	ctx := context.Background()
	greet := carmy.Tool(func(c carmy.Context, in Greet) (string, error) {
		return fmt.Sprintf("hello %s, from %s", in.Name, c.Principal), nil
	}, carmy.None, carmy.Name("greet"), carmy.Description("Greet someone"), carmy.Register(false))
	reg, err := carmy.New().Tool(greet).Build()
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()

	g := genkit.Init(ctx)
	genkit.DefineModel(g, "demo/model", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
		func(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			last := req.Messages[len(req.Messages)-1]
			if last.Role == ai.RoleTool { // the tool answered: say what it said
				return &ai.ModelResponse{Request: req, Message: ai.NewModelTextMessage(fmt.Sprint(last.Content[0].ToolResponse.Output))}, nil
			}
			ask := ai.NewToolRequestPart(&ai.ToolRequest{Name: "greet", Ref: "call-1", Input: map[string]any{"name": "Ada"}})
			return &ai.ModelResponse{Request: req, Message: &ai.Message{Role: ai.RoleModel, Content: []*ai.Part{ask}}}, nil
		})

	ts, err := genkitcarmy.New(reg, carmy.WithPrincipal("alice"))
	if err != nil {
		log.Fatal(err)
	}
	resp, err := genkit.Generate(ctx, g, ai.WithModelName("demo/model"), ai.WithPrompt("Greet Ada"),
		ai.WithTools(ts.Tools()...), ai.WithMiddleware(ts.Middleware()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Text())
	// Output: hello Ada, from alice
}
