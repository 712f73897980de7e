package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// TestContractLaunch: what each launch mode gives Docker as entrypoint and
// command.
func TestContractLaunch(t *testing.T) {
	for _, tc := range []struct {
		s       ContractSpec
		ep, cmd string
	}{
		{ContractSpec{}, "[]", "[]"},
		{ContractSpec{Cmd: []string{"a", "b"}}, "[]", "[a b]"},
		{ContractSpec{Entrypoint: "/app", Cmd: []string{"x"}}, "[/app]", "[x]"},
		{ContractSpec{Mode: "entrypoint", Entrypoint: "/app"}, "[/app]", "[]"},
		{ContractSpec{OnStart: "setup", Entrypoint: "/app", Cmd: []string{"x"}},
			"[/bin/sh -c setup\nif [ $# -gt 0 ]; then exec \"$@\"; fi\nwhile :; do sleep 3600; done onstart /app x]", "[]"},
		{ContractSpec{OnStart: "setup"}, "[/bin/sh -c setup\nif [ $# -gt 0 ]; then exec \"$@\"; fi\nwhile :; do sleep 3600; done onstart]", "[]"},
		{ContractSpec{Mode: "ssh", OnStart: "setup"}, "[/bin/sh -c setup\nwhile :; do sleep 3600; done onstart]", "[]"},
		{ContractSpec{Mode: "ssh"}, "[/bin/sh -c \nwhile :; do sleep 3600; done onstart]", "[]"},
		{ContractSpec{Mode: "jupyter", OnStart: "setup", Entrypoint: "httpd", Cmd: []string{"-f"}},
			"[/bin/sh -c setup\n\"$@\" &\nwhile :; do sleep 3600; done onstart httpd -f]", "[]"},
		{ContractSpec{Mode: "jupyter"}, "[/bin/sh -c \n" + JupyterCommand + " &\nwhile :; do sleep 3600; done onstart]", "[]"},
	} {
		ep, cmd := tc.s.Launch()
		if got := fmt.Sprint(ep); got != tc.ep {
			t.Errorf("%+v: entrypoint %q, want %q", tc.s, got, tc.ep)
		}
		if got := fmt.Sprint(cmd); got != tc.cmd {
			t.Errorf("%+v: cmd %q, want %q", tc.s, got, tc.cmd)
		}
	}
	if err := (ContractSpec{Org: "o", Machine: "m", Contract: "c", Image: TestImage, Mode: "jupyter?"}).Validate(); err == nil {
		t.Error("an unknown mode was accepted")
	}
	j := ContractSpec{Org: "o", Machine: "m", Contract: "c", Image: TestImage, Mode: "jupyter", Jupyter: &Jupyter{Port: 8888, Token: "t-1_A"}}
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
	if env := fmt.Sprint(j.Environ()); env != "[CSHARE_CONTRACT=c CSHARE_JUPYTER_BASE_URL=/contract/c/ CSHARE_JUPYTER_PORT=8888 CSHARE_JUPYTER_TOKEN=t-1_A]" {
		t.Errorf("jupyter environment %s", env)
	}
	for _, bad := range []ContractSpec{
		{Org: "o", Machine: "m", Contract: "c", Image: TestImage, Mode: "jupyter"},
		{Org: "o", Machine: "m", Contract: "c", Image: TestImage, Jupyter: &Jupyter{Port: 8888, Token: "t"}},
		{Org: "o", Machine: "m", Contract: "c", Image: TestImage, Mode: "jupyter", Jupyter: &Jupyter{Port: 8888, Token: "t;rm"}},
		{Org: "o", Machine: "m", Contract: "c", Image: TestImage, Mode: "jupyter", Jupyter: &Jupyter{Port: 0, Token: "t"}},
		{Org: "o", Machine: "m", Contract: "c", Image: TestImage, Mode: "jupyter", Jupyter: &Jupyter{Port: 1, Token: "t"}, Env: map[string]string{EnvJupyterToken: "x"}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestDockerJupyterDirect: on the local engine, a jupyter-mode contract
// with --direct runs its onstart and its command (busybox httpd standing
// in for Jupyter) and publishes its port on a free host port, which
// ListContracts reports, and which serves the base path.
func TestDockerJupyterDirect(t *testing.T) {
	d, cli := dockerForTest(t)
	org, b := testContractOrg(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := "cjup" + hex.EncodeToString(b[:])
	s := ContractSpec{Org: org, Machine: "m1", Contract: c, Image: TestImage, Mode: "jupyter",
		OnStart:    `mkdir -p /www$CSHARE_JUPYTER_BASE_URL && echo "token $CSHARE_JUPYTER_TOKEN" > /www$CSHARE_JUPYTER_BASE_URL/index.html`,
		Entrypoint: "httpd", Cmd: []string{"-f", "-p", "8888", "-h", "/www"}, Jupyter: &Jupyter{Port: 8888, Token: "tok", Direct: true}}
	id, err := d.CreateContract(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.StartContract(ctx, id); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := ""
		runs, err := d.ListContracts(ctx, org, "m1")
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs %+v, %v", runs, err)
		}
		if p := runs[0].Published; p == 0 {
			got = "no published port"
		} else if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/contract/%s/", p, c)); err != nil {
			got = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got = string(body); got == "token tok\n" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the published jupyter port: %s", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ins, err := cli.ContainerInspect(ctx, string(id)); err != nil || !ins.State.Running {
		t.Fatalf("the jupyter-mode instance is not up: %v", err)
	}
}

// TestDockerLaunchModes: on the local engine, a contract in ssh mode runs
// its onstart and stays up with no command of its own; one with
// --entrypoint runs that program with its arguments; a job's run with an
// entrypoint too, and the exec driver runs the entrypoint as its program.
func TestDockerLaunchModes(t *testing.T) {
	d, cli := dockerForTest(t)
	org, b := testContractOrg(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ssh := ContractSpec{Org: org, Machine: "m1", Contract: "cssh" + hex.EncodeToString(b[:]), Image: TestImage, Mode: "ssh", OnStart: "echo ready > /root/onstart"}
	id, err := d.CreateContract(ctx, ssh)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.StartContract(ctx, id); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	deadline := time.Now().Add(30 * time.Second)
	for {
		out.Reset()
		p, err := d.Enter(ctx, id, Process{Cmd: []string{"cat", "/root/onstart"}}, Stdio{Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := p.Wait(ctx); code == 0 && out.String() == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("onstart did not run: %q", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ins, err := cli.ContainerInspect(ctx, string(id)); err != nil || !ins.State.Running {
		t.Fatalf("the ssh-mode instance is not up: %v", err)
	}

	ep := ContractSpec{Org: org, Machine: "m1", Contract: "cep" + hex.EncodeToString(b[:]), Image: TestImage, Entrypoint: "/bin/echo", Cmd: []string{"from", "entrypoint"}}
	id2, err := d.CreateContract(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.StartContract(ctx, id2); err != nil {
		t.Fatal(err)
	}
	waitC, errC := cli.ContainerWait(ctx, string(id2), container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		if w.StatusCode != 0 {
			t.Fatalf("entrypoint contract exited %d", w.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	if logs, err := exec.Command("docker", "logs", string(id2)).CombinedOutput(); err != nil || !strings.Contains(string(logs), "from entrypoint") {
		t.Fatalf("entrypoint contract's output %q, %v", logs, err)
	}

	run, err := d.Start(ctx, Spec{Org: org, Job: "j", Instance: "i", Machine: "m1", Image: TestImage, Entrypoint: "/bin/sh", Cmd: []string{"-c", "exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := d.Wait(ctx, run); err != nil || st.Code != 3 {
		t.Fatalf("a job run with an entrypoint: %+v %v", st, err)
	}

	root := t.TempDir()
	stopAll(t, root)
	e, _ := newTestExec(t, root)
	er, err := e.Start(ctx, Spec{Org: org, Job: "j", Instance: "i", Machine: "m1", Entrypoint: "/bin/sh", Cmd: []string{"-c", "exit 4"}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := e.Wait(ctx, er); err != nil || st.Code != 4 {
		t.Fatalf("an exec run with an entrypoint: %+v %v", st, err)
	}
}

// testContractOrg is an org ID of this test alone (and its random bytes);
// the test's containers of that org are removed when it ends.
func testContractOrg(t *testing.T, cli *client.Client) (string, [4]byte) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	org := "test-org-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelOrg+"="+org))})
		for _, c := range list {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
	})
	return org, b
}
