package einocarmy_test

import (
	"context"
	"fmt"
	"log"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/adapters/einocarmy"
)

type Greet struct {
	Name string `json:"name" validate:"required"`
}

// demoModel stands in for a chat model: it asks for one call of greet,
// then repeats what the tool returned.
type demoModel struct{}

func (demoModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	if last := in[len(in)-1]; last.Role == schema.Tool {
		return schema.AssistantMessage(last.Content, nil), nil
	}
	return schema.AssistantMessage("", []schema.ToolCall{{ID: "call-1", Type: "function",
		Function: schema.FunctionCall{Name: "greet", Arguments: `{"name":"Ada"}`}}}), nil
}

func (m demoModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, in, opts...)
	return schema.StreamReaderFromArray([]*schema.Message{msg}), err
}

func (m demoModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return m, nil }

// An Eino ReAct agent calls a carmy tool as the user it acts for.
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

	tools, err := einocarmy.Tools(reg, carmy.WithPrincipal("alice"))
	if err != nil {
		log.Fatal(err)
	}
	agent, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: demoModel{}, ToolsConfig: compose.ToolsNodeConfig{Tools: tools}})
	if err != nil {
		log.Fatal(err)
	}
	out, err := agent.Generate(ctx, []*schema.Message{schema.UserMessage("Greet Ada")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Content)
	// Output: hello Ada, from alice
}
