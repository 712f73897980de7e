package web

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"sync"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

// The pictures are small inline SVGs built here from the services' data.
// Every text in them goes through text.Escape (control and bidi
// characters) and html.EscapeString, since they reach the page as
// template.HTML.

func attr(s string) string { return html.EscapeString(text.Escape(s)) }

// itemColours are the states of a job's items in the bar, left to right.
var itemColours = []struct{ name, class string }{
	{"done", "i-done"}, {"running", "i-running"}, {"failed", "i-failed"}, {"pending", "i-pending"},
}

// jobBar is a bar of a job's items: done, running, failed, pending, each
// as wide as its share of the total.
func jobBar(it api.Items) template.HTML {
	const w, h = 200.0, 12.0
	counts := []int64{it.Done, it.Running, it.Failed, it.Pending}
	total := it.Total
	if total <= 0 {
		total = 0
		for _, c := range counts {
			total += c
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="bar" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="items: %d done, %d running, %d failed, %d pending">`,
		w, h, w, h, it.Done, it.Running, it.Failed, it.Pending)
	fmt.Fprintf(&b, `<rect class="i-empty" width="%g" height="%g"/>`, w, h)
	x := 0.0
	for i, c := range counts {
		if c <= 0 || total <= 0 {
			continue
		}
		cw := w * float64(c) / float64(total)
		fmt.Fprintf(&b, `<rect class="%s" x="%.2f" width="%.2f" height="%g"><title>%d %s</title></rect>`, itemColours[i].class, x, cw, h, c, itemColours[i].name)
		x += cw
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// statusClass is the CSS class of a machine's status: the seed's colours
// (available green, busy yellow, offline dark; pending grey).
func statusClass(m api.MachineInfo) string {
	if m.DiskFull {
		return "st-diskfull"
	}
	switch m.Status {
	case "available", "busy", "offline", "pending", "approved":
		return "st-" + m.Status
	}
	return "st-other"
}

// statusText is a machine's status for people, with "disk full".
func statusText(m api.MachineInfo) string {
	if m.DiskFull {
		return m.Status + ", disk full"
	}
	return m.Status
}

// machineGrid is a square per machine, coloured by its status, named in
// its tooltip.
func machineGrid(ms []api.MachineInfo) template.HTML {
	const cell, gap, cols = 18, 4, 16
	rows := (len(ms) + cols - 1) / cols
	w := min(len(ms), cols)*(cell+gap) + gap
	h := rows*(cell+gap) + gap
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="grid" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%d machines by status">`, w, h, w, h, len(ms))
	for i, m := range ms {
		x, y := gap+(i%cols)*(cell+gap), gap+(i/cols)*(cell+gap)
		fmt.Fprintf(&b, `<a href="/machines#m-%s"><rect class="%s" x="%d" y="%d" width="%d" height="%d" rx="3" data-machine="%s"><title>%s: %s</title></rect></a>`,
			attr(m.ID), statusClass(m), x, y, cell, cell, attr(m.ID), attr(m.Name), attr(statusText(m)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// busySamples are the org's busy slots over the last hour: running
// instances and the slots of the machines online, sampled by Run.
type busySamples struct {
	mu sync.Mutex
	s  []busySample
}

type busySample struct {
	at          time.Time
	busy, total int
}

const busyWindow = time.Hour

func (b *busySamples) add(at time.Time, busy, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.s = append(b.s, busySample{at, busy, total})
	cut := 0
	for cut < len(b.s) && at.Sub(b.s[cut].at) > busyWindow {
		cut++
	}
	b.s = append(b.s[:0], b.s[cut:]...)
}

func (b *busySamples) get() []busySample {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]busySample(nil), b.s...)
}

// busyChart draws samples over the hour before now: the busy slots as a
// filled line under the slots online.
func busyChart(samples []busySample, now time.Time) template.HTML {
	const w, h, pad = 300.0, 60.0, 2.0
	top := 1
	for _, s := range samples {
		top = max(top, s.total, s.busy)
	}
	x := func(t time.Time) float64 {
		return pad + (w-2*pad)*(1-float64(now.Sub(t))/float64(busyWindow))
	}
	y := func(v int) float64 { return h - pad - (h-2*pad)*float64(v)/float64(top) }
	var b strings.Builder
	last, online := 0, 0
	if len(samples) > 0 {
		last, online = samples[len(samples)-1].busy, samples[len(samples)-1].total
	}
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="busy slots over the last hour, now %d">`, w, h, w, h, last)
	fmt.Fprintf(&b, `<rect class="c-bg" width="%g" height="%g"/>`, w, h)
	if len(samples) > 0 {
		var area, cap strings.Builder
		fmt.Fprintf(&area, "M%.1f,%.1f", x(samples[0].at), h-pad)
		for i, s := range samples {
			fmt.Fprintf(&area, " L%.1f,%.1f", x(s.at), y(s.busy))
			sep := " L"
			if i == 0 {
				sep = "M"
			}
			fmt.Fprintf(&cap, "%s%.1f,%.1f", sep, x(s.at), y(s.total))
		}
		fmt.Fprintf(&area, " L%.1f,%.1f Z", x(samples[len(samples)-1].at), h-pad)
		fmt.Fprintf(&b, `<path class="c-cap" d="%s"/><path class="c-busy" d="%s"/>`, cap.String(), area.String())
	}
	fmt.Fprintf(&b, `<text x="%g" y="12" class="c-label">%d of %d slots busy</text></svg>`, pad+2, last, online)
	return template.HTML(b.String())
}
