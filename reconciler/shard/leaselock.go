package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseGVR is coordination.k8s.io/v1 leases.
var LeaseGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// LeaseLock is client-go's LeaseLock over the dynamic client: Kontinue
// talks to the API server only through dynamic clients, so it does not pull
// in the typed coordination client. The record conversion is client-go's.
// Leader election (package main) and Announce write a shard's Lease
// through it.
type LeaseLock struct {
	client          dynamic.Interface
	namespace, name string
	identity        string

	mu    sync.Mutex
	lease *unstructured.Unstructured // last read or written; carries resourceVersion
}

var _ resourcelock.Interface = (*LeaseLock)(nil)

// NewLeaseLock is the lock of the Lease namespace/name, as identity.
func NewLeaseLock(client dynamic.Interface, namespace, name, identity string) *LeaseLock {
	return &LeaseLock{client: client, namespace: namespace, name: name, identity: identity}
}

func (l *LeaseLock) leases() dynamic.ResourceInterface {
	return l.client.Resource(LeaseGVR).Namespace(l.namespace)
}

// Get reads the Lease and returns its record and the record's JSON, which
// the elector compares to notice changes.
func (l *LeaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	u, err := l.leases().Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	var lease coordinationv1.Lease
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &lease); err != nil {
		return nil, nil, fmt.Errorf("lease %s: %w", l.Describe(), err)
	}
	l.mu.Lock()
	l.lease = u
	l.mu.Unlock()
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}

// Create creates the Lease holding ler.
func (l *LeaseLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}
	u, err := toUnstructured(lease)
	if err != nil {
		return err
	}
	got, err := l.leases().Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.lease = got
	l.mu.Unlock()
	return nil
}

// Update writes ler over the Lease last seen. The resourceVersion of that
// read makes the write conditional: if another candidate wrote in between,
// the API server answers Conflict and this candidate does not lead.
func (l *LeaseLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	last := l.lease
	l.mu.Unlock()
	if last == nil {
		return errors.New("lease not read yet: call Get or Create first")
	}
	var lease coordinationv1.Lease
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(last.Object, &lease); err != nil {
		return fmt.Errorf("lease %s: %w", l.Describe(), err)
	}
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	u, err := toUnstructured(&lease)
	if err != nil {
		return err
	}
	got, err := l.leases().Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.lease = got
	l.mu.Unlock()
	return nil
}

// RecordEvent logs nothing: the elector logs transitions itself and the
// kontinue_leader gauge reports them.
func (l *LeaseLock) RecordEvent(string) {}

// Identity is this candidate's name in the Lease.
func (l *LeaseLock) Identity() string { return l.identity }

// Describe names the Lease.
func (l *LeaseLock) Describe() string { return l.namespace + "/" + l.name }

func toUnstructured(lease *coordinationv1.Lease) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(lease)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("coordination.k8s.io/v1")
	u.SetKind("Lease")
	return u, nil
}
