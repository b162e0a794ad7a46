package carmy_test

import (
	"context"
	"fmt"

	"github.com/carmy-dev/carmy"
)

// Requires makes a call need a permission; a caller without it is refused,
// before its input is read, with the permission named.
func ExampleRequires() {
	refund := carmy.Tool(func(carmy.Context) error { return nil }, carmy.ExternalWrite,
		carmy.Name("refund"), carmy.Requires("payments"), carmy.Register(false))
	reg, _ := carmy.New().Tool(refund).Build()
	defer reg.Close()
	ctx := context.Background()

	_, err := reg.Execute(ctx, carmy.Call{Tool: "refund", Principal: "agent"})
	fmt.Println(carmy.CodeOf(err))
	fmt.Println(err.(*carmy.Error).Details["missing"])

	_, err = reg.Execute(ctx, carmy.Call{Tool: "refund", Principal: "agent", Permissions: []string{"payments"}})
	fmt.Println(err)
	// Output:
	// permission_denied
	// [payments]
	// <nil>
}

// EffectPermissions says once which permission each kind of action needs;
// ToolsFor lists what a caller may call, as every list the registry serves
// does.
func ExampleBuilder_EffectPermissions() {
	read := carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("read_report"), carmy.Register(false))
	edit := carmy.Tool(func() error { return nil }, carmy.Write, carmy.Name("edit_report"), carmy.Register(false))
	reg, _ := carmy.New().Tool(read, edit).EffectPermissions(map[carmy.Effect]string{
		carmy.None:          "tools:read",
		carmy.Read:          "tools:read",
		carmy.Write:         "tools:write",
		carmy.ExternalWrite: "tools:write",
		carmy.Destructive:   "tools:write",
	}).Build()
	defer reg.Close()

	m, _ := reg.Lookup("edit_report")
	fmt.Println("edit_report requires", m.Requires)
	for _, grants := range [][]string{nil, {"tools:read"}, {"tools:read", "tools:write"}} {
		var names []string
		for _, t := range reg.ToolsFor(context.Background(), carmy.Identity{Permissions: grants}) {
			names = append(names, t.Name)
		}
		fmt.Println(grants, "sees", names)
	}
	// Output:
	// edit_report requires [tools:write]
	// [] sees []
	// [tools:read] sees [read_report]
	// [tools:read tools:write] sees [edit_report read_report]
}
