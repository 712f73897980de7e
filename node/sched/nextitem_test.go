package sched

import (
	"testing"
	"time"

	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/smartshare"
)

// TestOwnerMoves: a job's previous owners are those before its owners last
// changed; a plan change that leaves its instances alone (a relabel,
// another job) keeps them and their time, and they go PrevFor after.
func TestOwnerMoves(t *testing.T) {
	inst := func(job, m string, slot int, kind string) smartshare.Instance {
		return smartshare.Instance{Job: job, Machine: m, Slot: slot, Kind: kind}
	}
	p0 := smartshare.Result{Hash: "p0", Instances: []smartshare.Instance{
		inst("a", "m1", 0, "primary"), inst("a", "m2", 0, "secondary"), inst("a", "m3", 0, "secondary"), inst("b", "m1", 1, "primary")}}
	p1 := smartshare.Result{Hash: "p1", Instances: []smartshare.Instance{ // m3 leaves a
		inst("a", "m1", 0, "primary"), inst("a", "m2", 0, "secondary"), inst("b", "m1", 1, "primary")}}
	p2 := smartshare.Result{Hash: "p2", Instances: []smartshare.Instance{ // a relabel; b gets a slot
		inst("a", "m1", 0, "secondary"), inst("a", "m2", 0, "primary"), inst("b", "m1", 1, "primary"), inst("b", "m3", 0, "primary")}}
	t0 := time.Unix(1_700_000_000, 0)
	var m ownerMoves
	m.update(smartshare.Result{}, p0, t0)
	if len(m) != 0 {
		t.Fatalf("the first plan recorded %v; no job had owners before", m)
	}
	m.update(p0, p1, t0.Add(time.Second))
	if mv, ok := m["a"]; !ok || mv.hash != "p0" || !mv.at.Equal(t0.Add(time.Second)) {
		t.Fatalf("a's owners changed at 1s from p0's; recorded %+v (%v)", mv, ok)
	}
	if _, ok := m["b"]; ok {
		t.Fatal("b's owners did not change; recorded")
	}
	m.update(p1, p2, t0.Add(1500*time.Millisecond))
	if mv := m["a"]; mv.hash != "p0" || !mv.at.Equal(t0.Add(time.Second)) {
		t.Fatalf("a relabelled only: want p0 at 1s kept, got %s at %s", mv.hash, mv.at.Sub(t0))
	}
	if mv, ok := m["b"]; !ok || mv.hash != "p1" {
		t.Fatalf("b got an instance: want p1 recorded, got %+v (%v)", mv, ok)
	}
	m.update(p2, p1, t0.Add(time.Second+dispatch.PrevFor))
	if mv, ok := m["a"]; ok {
		t.Fatalf("a's change is PrevFor old: want it gone, got %+v", mv)
	}
	if mv, ok := m["b"]; !ok || mv.hash != "p2" {
		t.Fatalf("b lost its instance: want p2 recorded, got %+v (%v)", mv, ok)
	}
}
