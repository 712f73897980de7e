package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// browser starts Debian's Chromium, headless, for one test (make test
// installs it: scripts/browser.sh); without it the test is skipped with
// the reason.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on this machine (make test installs it with scripts/browser.sh): " + err.Error())
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Skip("chromium does not start here: " + err.Error())
	}
	return ctx
}

// run runs browser actions with a deadline, failing the test with what.
func run(t *testing.T, ctx context.Context, what string, d time.Duration, acts ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(c, acts...); err != nil {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		page, _ := chromedp.Run(c, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("%s: %v\npage: %.3000s", what, err, page)
	}
}

// into runs a, keeping its value in out.
func into[T any](a chromedp.Action[T], out *T) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		v, err := a(ctx, tg)
		*out = v
		return chromedp.Void{}, err
	}
}

// waitFor polls the page until the JavaScript condition holds, through
// the navigations a form's post and redirect make (run's deadline ends it).
func waitFor(cond string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var last error
		for {
			ok, err := chromedp.Evaluate[bool](cond)(ctx, tg)
			if err == nil && ok {
				return chromedp.Void{}, nil
			}
			last = err
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("waiting for %s: %w (last: %v)", cond, ctx.Err(), last)
			case <-tick.C:
			}
		}
	}
}

func hasText(sel, s string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, s)
}

// TestDashboardInABrowser drives the dashboard of real nodes in Chromium:
// sign in; approve a pending machine; submit a job from the form and watch
// its items finish (the page polls, or follows the event stream); invite a
// member; change a setting; a member is refused the admin pages; the owner
// deletes the org through the danger zone.
func TestDashboardInABrowser(t *testing.T) {
	ctx := browser(t)
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, slots: 2, runFor: 50 * time.Millisecond})
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node
	key, err := n0.orgs.CreateOrg(ctxT(t), api.OrgCreate{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := n1.orgs.Join(ctxT(t), api.JoinRequest{OrgKey: key.Key, Name: "office-gpu-1"}); err != nil || res.Status != ledger.MachinePending {
		t.Fatalf("join: %+v %v", res, err)
	}
	n1ID := n1.ID().String()
	eventually(t, 30*time.Second, "n0 sees n1 pending", func() string {
		if st := machineStatus(n0, n1ID); st != ledger.MachinePending {
			return "status " + st
		}
		return ""
	})
	// Two nodes on one host share cookies (they ignore the port): the
	// member's node is opened as localhost, the owner's as 127.0.0.1.
	base0 := "http://" + n0.APIAddr()
	base1 := "http://localhost:" + n1.APIAddr()[strings.LastIndex(n1.APIAddr(), ":")+1:]
	signIn := func(n *Node, base string) chromedp.Action[chromedp.Void] {
		code, err := n.web.SignInCode(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return chromedp.Navigate(base + code.Path)
	}

	// Sign in.
	run(t, ctx, "sign in", time.Minute, signIn(n0, base0), chromedp.WaitVisible(chromedp.CSS("#total-machines")), waitFor(hasText("nav .org", "acme")))

	// Approve the pending machine.
	approve := fmt.Sprintf(`tr[data-machine=%q] button.approve`, n1ID)
	run(t, ctx, "approve", time.Minute, chromedp.Navigate(base0+"/machines"), chromedp.Click(chromedp.CSS(approve)),
		waitFor(hasText(".flash.ok", "approve done")))
	eventually(t, 30*time.Second, "n1 approved", func() string {
		if st := machineStatus(n0, n1ID); st != ledger.MachineApproved {
			return "status " + st
		}
		return ""
	})

	// Submit a job from the form, with Expert Mode, and watch its items
	// finish on the job's page without reloading it.
	run(t, ctx, "submit", time.Minute, chromedp.Navigate(base0+"/jobs"), chromedp.Click(chromedp.CSS("#submit-card summary")),
		chromedp.SendKeys(chromedp.CSS(`#submit-form input[name=name]`), "render"),
		chromedp.SendKeys(chromedp.CSS(`#submit-form input[name=cmd]`), "echo frame $CSHARE_ITEM"),
		chromedp.SendKeys(chromedp.CSS(`#submit-form input[name=range]`), "1-6"),
		chromedp.Click(chromedp.CSS("#expert")),
		chromedp.SendKeys(chromedp.CSS(`#submit-form input[name=max_cpus]`), "4"),
		chromedp.Click(chromedp.CSS("#submit-job")),
		waitFor(hasText(".flash.ok", "Submitted job render")))
	var marker string
	run(t, ctx, "items finish", 2*time.Minute, into(chromedp.Evaluate[string](`window.__stay = "same page"; window.__stay`), &marker),
		waitFor(hasText("#job-items", "6 done")), waitFor(hasText("#job-state", "done")),
		into(chromedp.Evaluate[string](`window.__stay`), &marker))
	if marker != "same page" {
		t.Errorf("the job's page reloaded while its items finished (marker %q)", marker)
	}

	// Invite a member: the code and the link are shown.
	var code string
	var link chromedp.AttributeResult
	run(t, ctx, "invite", time.Minute, chromedp.Navigate(base0+"/members"), chromedp.Click(chromedp.CSS("#invite")),
		chromedp.WaitVisible(chromedp.CSS("#invite-code")), into(chromedp.Text(chromedp.CSS("#invite-code")), &code),
		into(chromedp.AttributeValue(chromedp.CSS("#invite-link"), "href"), &link))
	if code == "" || !strings.Contains(link.Value, "/join?code=") {
		t.Errorf("invite: code %q, link %q", code, link.Value)
	}

	// Change a setting.
	run(t, ctx, "settings", time.Minute, chromedp.Navigate(base0+"/settings"),
		chromedp.SetValue(chromedp.CSS(`#settings-form textarea[name=description]`), "render farm"),
		chromedp.Click(chromedp.CSS("#save-settings")), waitFor(hasText(".flash.ok", "Saved the settings")))
	eventually(t, 30*time.Second, "the description on n1", func() string {
		if o, err := n1.orgs.Org(ctxT(t)); err != nil || o.Description != "render farm" {
			return fmt.Sprintf("%q %v", o.Description, err)
		}
		return ""
	})
	if shot := os.Getenv("CSHARE_DASHBOARD_SCREENSHOT"); shot != "" {
		var png []byte
		run(t, ctx, "screenshot", time.Minute, chromedp.Navigate(base0+"/"), chromedp.WaitVisible(chromedp.CSS("#total-machines")),
			into(chromedp.FullScreenshot(100), &png))
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The member (n1's person) is offered no admin page, and refused one.
	var settingsLinks int
	run(t, ctx, "member", time.Minute, signIn(n1, base1), chromedp.WaitVisible(chromedp.CSS("#total-machines")),
		into(chromedp.Evaluate[int](`document.querySelectorAll("#nav-settings").length`), &settingsLinks),
		chromedp.Navigate(base1+"/settings"), waitFor(hasText("#page-error", "only admins and the owner")),
		chromedp.Navigate(base1+"/members"), waitFor(`document.querySelector("#invite-form") === null`))
	if settingsLinks != 0 {
		t.Errorf("the member's sidebar offers Settings")
	}

	// The owner deletes the org by typing its name.
	run(t, ctx, "delete", time.Minute, chromedp.Navigate(base0+"/settings"),
		chromedp.SendKeys(chromedp.CSS("#delete-confirm"), "acme"), chromedp.Click(chromedp.CSS("#delete-org")),
		waitFor(hasText(".flash.ok", "Deleted the org")))
	m.waitNoOrg(30*time.Second, 0, 1) // each node starts again in no org (a new *Node: m.follow)
	// Still signed in: the node carries its sessions into no org.
	run(t, ctx, "no org", time.Minute, chromedp.Navigate(base0+"/"), waitFor(hasText("main", "This node is in no org")))
}
