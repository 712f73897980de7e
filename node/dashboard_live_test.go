package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
)

// beforeScripts runs js in every document the tab opens from now on,
// before the page's own scripts (the dashboard's test hooks).
func beforeScripts(js string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: js})
		return err
	})
}

// signInAt is the action that signs n's dashboard in at base.
func signInAt(t *testing.T, n *Node, base string) chromedp.Action[chromedp.Void] {
	code, err := n.web.SignInCode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return chromedp.Navigate(base + code.Path)
}

// TestDashboardOnAPhone renders the overview, jobs and machines pages at a
// phone's viewport (390×844, mobile emulation): nothing is wider than the
// screen, and the menu opens and takes you to another page.
func TestDashboardOnAPhone(t *testing.T) {
	ctx := browser(t)
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond, slots: 1, runFor: runtime.FakeManual})
	m.formOrg()
	n := m.nodes[0].Node
	long := strings.Repeat("a-rather-long-argument-", 12)
	submit(t, n, api.JobSubmit{Name: "a-job-with-a-long-name-that-does-not-fit-a-phone", Cmd: []string{"echo", long}, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](3)})
	base := "http://" + n.APIAddr()
	run(t, ctx, "phone", time.Minute, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait, chromedp.EmulateScale(3)),
		signInAt(t, n, base), chromedp.WaitVisible(chromedp.CSS("#total-machines")))
	for _, p := range []string{"/", "/jobs", "/machines"} {
		var width []int
		run(t, ctx, "open "+p, time.Minute, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("main h1")),
			into(chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth, document.documentElement.clientWidth]`), &width))
		if len(width) != 3 || width[1] != 390 || width[0] > width[1] || width[2] > 390 {
			t.Errorf("%s at 390 px: scrollWidth, innerWidth, clientWidth = %v: the page is wider than the phone", p, width)
		}
	}
	// The menu: hidden behind its button, opened by it, and a way on.
	var shown, fits bool
	run(t, ctx, "menu", time.Minute, chromedp.Navigate(base+"/machines"), chromedp.WaitVisible(chromedp.CSS("label.menu-button")),
		into(chromedp.Evaluate[bool](`getComputedStyle(document.querySelector("nav.side")).display !== "none"`), &shown))
	if shown {
		t.Error("the menu is open before its button is pressed")
	}
	run(t, ctx, "open the menu", time.Minute, chromedp.Click(chromedp.CSS("label.menu-button")),
		chromedp.WaitVisible(chromedp.CSS(`nav.side a[href="/jobs"]`)),
		into(chromedp.Evaluate[bool](`(() => { const r = document.querySelector('nav.side a[href="/jobs"]').getBoundingClientRect();
			return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth && r.top >= 0; })()`), &fits),
		chromedp.Click(chromedp.CSS(`nav.side a[href="/jobs"]`)), waitFor(`location.pathname === "/jobs" && !!document.querySelector("#submit-card")`))
	if !fits {
		t.Error("the menu's Jobs link is not on the screen once the menu is open")
	}
}

// liveCounts are the dashboard's refreshes by cause (app.js:
// window.cshareLive).
type liveCounts struct {
	Event int `json:"event"`
	Poll  int `json:"poll"`
}

// TestDashboardLiveFromTheStream: with the fallback polling off (the
// page's test hook), an item finishing and a machine going offline show on
// the open page, without reloading it: the event stream brought them.
func TestDashboardLiveFromTheStream(t *testing.T) {
	ctx := browser(t)
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, slots: 1, runFor: runtime.FakeManual})
	m.formOrg()
	n0 := m.nodes[0].Node
	n1ID := m.nodes[1].ID().String()
	job := submit(t, n0, api.JobSubmit{Name: "held", Cmd: []string{"true"}, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](4)})
	// The items hang until the test completes them (FakeManual): one runs
	// on n0 once its page is open.
	eventually(t, 30*time.Second, "an item of the job runs on n0", func() string {
		if len(m.nodes[0].drv.Running()) == 0 {
			return "none running on n0"
		}
		return ""
	})
	base := "http://" + n0.APIAddr()
	counts := func(what string) liveCounts {
		var c liveCounts
		run(t, ctx, what, 30*time.Second, into(chromedp.Evaluate[liveCounts](`window.cshareLive`), &c))
		return c
	}
	streaming := waitFor(hasText("#live", "event stream"))
	run(t, ctx, "job page", time.Minute, beforeScripts(`window.csharePollMs = 0;`), signInAt(t, n0, base),
		chromedp.WaitVisible(chromedp.CSS("#total-machines")), chromedp.Navigate(base+"/jobs/"+job.ID),
		waitFor(hasText("#job-items", "0 done")), streaming, chromedp.Evaluate[chromedp.Void](`window.__stay = "same page"`),
		// Why it waits, machine by machine: a row for each.
		waitFor(`document.querySelectorAll("#job-explain tr[data-machine]").length === 2`))
	before := counts("counts before the item ends")

	for _, r := range m.nodes[0].drv.Running() {
		if err := m.nodes[0].drv.Complete(r, 0); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, "the item's end shows", time.Minute, waitFor(hasText("#job-items", "1 done")), waitFor(`window.__stay === "same page"`))
	after := counts("counts after the item ended")
	if after.Poll != 0 || before.Poll != 0 || after.Event <= before.Event {
		t.Errorf("refreshes before %+v, after %+v: want the stream's (event) to have grown, and no poll", before, after)
	}

	row := fmt.Sprintf(`tr[data-machine=%q] .badge`, n1ID)
	run(t, ctx, "machines page", time.Minute, chromedp.Navigate(base+"/machines"), chromedp.WaitVisible(chromedp.CSS(row)),
		streaming, chromedp.Evaluate[chromedp.Void](`window.__stay = "same page"`))
	var status string
	run(t, ctx, "n1's status", 30*time.Second, into(chromedp.Text(chromedp.CSS(row)), &status))
	if strings.Contains(status, "offline") {
		t.Fatalf("n1 is %q before it stops", status)
	}
	before = counts("counts before n1 stops")
	m.stop(1)
	run(t, ctx, "n1 offline shows", time.Minute, waitFor(hasText(row, "offline")), waitFor(`window.__stay === "same page"`))
	after = counts("counts after n1 stopped")
	if after.Poll != 0 || after.Event <= before.Event {
		t.Errorf("refreshes before %+v, after %+v: want the stream's (event) to have grown, and no poll", before, after)
	}
}
