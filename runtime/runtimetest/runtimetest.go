// Package runtimetest helps other packages' tests run real containers: it
// returns a docker driver on the local engine with runtime.TestImage built,
// or skips the test with the reason when no engine is reachable.
package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cshare/cshare/runtime"
)

var (
	imageOnce sync.Once
	imageErr  error
)

// Docker returns a docker driver on the local engine with runtime.TestImage
// present, building it with scripts/testimage.sh (found by walking up from
// the test's directory to go.mod) if needed. It skips tb when no engine is
// reachable and fails it when the engine is there but the image cannot be
// built. The driver is closed when the test ends.
func Docker(tb testing.TB) *runtime.Docker {
	tb.Helper()
	d, err := runtime.NewDockerFromEnv()
	if err != nil {
		tb.Skipf("skipping: no Docker client configuration: %v", err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Ping(ctx); err != nil {
		tb.Skipf("skipping: no Docker engine reachable: %v", err)
	}
	imageOnce.Do(func() { imageErr = buildTestImage() })
	if imageErr != nil {
		tb.Fatalf("runtimetest: the engine is reachable but %s cannot be built: %v", runtime.TestImage, imageErr)
	}
	return d
}

func buildTestImage() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return errors.New("no go.mod above the test directory, so scripts/testimage.sh cannot be found")
		}
		dir = parent
	}
	out, err := exec.Command("bash", filepath.Join(dir, "scripts", "testimage.sh")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("scripts/testimage.sh: %v\n%s", err, out)
	}
	return nil
}
