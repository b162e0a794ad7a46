package anthropiccarmy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/adapters/anthropiccarmy"
)

type Greet struct {
	Name string `json:"name" validate:"required"`
}

// demoAPI stands in for the Messages API: its model asks for one call of
// greet, then repeats what the tool returned.
func demoAPI(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	var results []struct {
		Content []struct{ Text string } `json:"content"`
	}
	_ = json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &results)
	content, stop := []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "greet", "input": map[string]any{"name": "Ada"}}}, "tool_use"
	if len(results) > 0 && len(results[0].Content) > 0 {
		content, stop = []any{map[string]any{"type": "text", "text": results[0].Content[0].Text}}, "end_turn"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-demo",
		"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}})
}

// The tool runner calls a carmy tool as the user it acts for; a call that
// needs confirmation would ask the person through the Confirm callback.
func Example() {
	greet := carmy.Tool(func(c carmy.Context, in Greet) (string, error) {
		return fmt.Sprintf("hello %s, from %s", in.Name, c.Principal), nil
	}, carmy.None, carmy.Name("greet"), carmy.Description("Greet someone"), carmy.Register(false))
	reg, err := carmy.New().Tool(greet).Build()
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	api := httptest.NewServer(http.HandlerFunc(demoAPI))
	defer api.Close()

	ts, err := anthropiccarmy.New(reg, carmy.WithPrincipal("alice"))
	if err != nil {
		log.Fatal(err)
	}
	ts.Confirm(func(ctx context.Context, a anthropiccarmy.Approval) (bool, string, error) {
		return askThePerson(ctx, fmt.Sprintf("Allow %s with %s?", a.Tool, a.Shown))
	})
	client := anthropic.NewClient(option.WithBaseURL(api.URL), option.WithAPIKey("demo"))
	runner := anthropiccarmy.Runner(ts, client.Beta.Messages.NewToolRunner(ts.Tools(), anthropic.BetaToolRunnerParams{
		BetaMessageNewParams: anthropic.BetaMessageNewParams{Model: "claude-demo", MaxTokens: 1024,
			Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Greet Ada"))}},
	}))
	msg, err := runner.RunToCompletion(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(msg.Content[0].Text)
	// Output: hello Ada, from alice
}

// askThePerson stands in for the host's own way to ask its user.
func askThePerson(_ context.Context, question string) (bool, string, error) {
	return strings.HasPrefix(question, "Allow"), "person:alice", nil
}
