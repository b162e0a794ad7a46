package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func TestApprovalStoreConformance(t *testing.T) {
	c := newClient(t)
	storetest.TestApprovalStore(t, func(t *testing.T) store.ApprovalStore {
		return newStore(t, c, testPrefix(t, c))
	})
}

// Every host sees the approvals of the others.
func TestApprovalStoreAcrossHosts(t *testing.T) {
	c := newClient(t)
	storetest.TestApprovalStore(t, func(t *testing.T) store.ApprovalStore {
		return &approvalsRoundRobin{hosts: hosts(t, c, testPrefix(t, c), 3)}
	})
}

// approvalsRoundRobin sends each approval call to the next host.
type approvalsRoundRobin struct {
	hosts []*Store
	next  atomic.Uint32
}

func (r *approvalsRoundRobin) host() *Store { return r.hosts[int(r.next.Add(1))%len(r.hosts)] }

func (r *approvalsRoundRobin) Create(ctx context.Context, a store.Approval) (store.Approval, error) {
	return r.host().Create(ctx, a)
}
func (r *approvalsRoundRobin) Get(ctx context.Context, id string) (store.Approval, error) {
	return r.host().Get(ctx, id)
}
func (r *approvalsRoundRobin) List(ctx context.Context, after string, limit int) ([]store.Approval, error) {
	return r.host().List(ctx, after, limit)
}
func (r *approvalsRoundRobin) Decide(ctx context.Context, id string, approve bool, approver string) (store.Approval, error) {
	return r.host().Decide(ctx, id, approve, approver)
}
func (r *approvalsRoundRobin) Consume(ctx context.Context, id, requestID string) (store.Approval, error) {
	return r.host().Consume(ctx, id, requestID)
}

// A call approved on one host runs once, on another: the builder keeps
// approvals in a store that keeps them.
func TestApprovalsAcrossRegistries(t *testing.T) {
	c := newClient(t)
	prefix := testPrefix(t, c)
	var runs atomic.Int32
	type in struct {
		ID int `json:"id"`
	}
	del := carmy.Tool(func(in) error { runs.Add(1); return nil }, carmy.Destructive,
		carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	regs := make([]*carmy.Registry, 2)
	stores := hosts(t, c, prefix, 2)
	for i := range regs {
		reg := build(t, carmy.New().Tool(del).Store(stores[i]).Logger(quiet))
		regs[i] = reg
	}
	ctx := context.Background()
	call := carmy.Call{Tool: "delete_note", Input: []byte(`{"id":1}`), Principal: "agent"}
	_, err := regs[0].Execute(ctx, call)
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != carmy.CodeConfirmationRequired {
		t.Fatalf("err = %v; want confirmation_required", err)
	}
	id, _ := e.Details["approval_id"].(string)
	if _, err := stores[1].Decide(ctx, id, true, "alice"); err != nil {
		t.Fatalf("the approval is not in Redis: %v", err)
	}
	for i, want := range []carmy.Code{"", carmy.CodeConfirmationRequired} {
		if _, err := regs[1-i].Execute(ctx, call); carmy.CodeOf(err) != want {
			t.Fatalf("call %d on host %d = %v; want %q", i, 1-i, err, want)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("runs = %d; want 1", runs.Load())
	}
}
