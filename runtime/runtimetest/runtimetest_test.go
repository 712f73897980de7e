package runtimetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/runtime"
)

func TestDockerRunsTestImage(t *testing.T) {
	d := Docker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := d.Start(ctx, runtime.Spec{Job: "runtimetest", Instance: "i", Item: 3, Image: runtime.TestImage, Cmd: []string{"sh", "-c", "echo item=$CSHARE_ITEM"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Remove(context.Background(), id) })
	if es, err := d.Wait(ctx, id); err != nil || es.Code != 0 {
		t.Fatalf("Wait = %+v, %v", es, err)
	}
	logs, err := d.Logs(ctx, id)
	if err != nil || !strings.Contains(string(logs), "item=3") {
		t.Errorf("Logs = %q, %v", logs, err)
	}
}
