package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// window is a span of virtual time whose traffic is measured.
type window struct {
	name         string
	start, end   time.Duration
	closed       bool
	tx0, rx0     []counter
	tx1, rx1     []counter
	msg0, msg1   int           // messages published within
	ent0, ent1   int           // entries written within
	fold0, fold1 time.Duration // the folders' fold time so far
}

func (w *world) window(name string, at time.Duration) *window {
	win := &window{name: name, start: at}
	w.windows = append(w.windows, win)
	open := func() {
		win.start = w.now
		win.tx0, win.rx0 = w.snapshot()
		win.msg0, win.ent0, win.fold0 = len(w.msgs), len(w.ents), w.foldCPU.sum
	}
	if at <= w.now {
		open()
	} else {
		w.at(at-w.now, open)
	}
	return win
}

func (w *world) closeWindow(win *window) {
	if win.closed {
		return
	}
	win.closed, win.end = true, w.now
	win.tx1, win.rx1 = w.snapshot()
	win.msg1, win.ent1, win.fold1 = len(w.msgs), len(w.ents), w.foldCPU.sum
}

func (w *world) snapshot() (tx, rx []counter) {
	tx, rx = make([]counter, len(w.ms)), make([]counter, len(w.ms))
	for i, m := range w.ms {
		tx[i], rx[i] = m.tx, m.rx
	}
	return tx, rx
}

// Report is what a run measured.
type Report struct {
	Config  Config
	Windows []WindowReport
	// The job: its submission entry's way to every machine (time, and the
	// most forwarding hops of its announcement), and the time from its
	// submission to every machine seeing every item done.
	JobEntryReach time.Duration
	JobEntryHops  int
	JobFirstDone  time.Duration
	JobAllDone    time.Duration
	ItemsRunTwice int // items started more than once (two slots took one)
	Fetches       int // sync requests
	// What the real checks cost in this run (wall time, mean): the
	// stateless checks of a heartbeat and of a heads announcement (with its
	// pushed entry), and a folder's fold of one entry.
	CheckHeartbeat, CheckHeads, Fold time.Duration
	// Messages dropped by validators: rejected (bad), heartbeats older than
	// the last accepted (reordered), heads not newer (stale).
	Rejected, Reordered, Stale int
	Events                     int
	Simulated                  time.Duration
	MeanConns, MeanMesh        float64
}

// WindowReport is one window: what reached every machine, and each
// machine's traffic a second.
type WindowReport struct {
	Name    string
	Seconds float64
	// Heartbeats and heads announcements published within the window, and
	// how many reached every machine (by the end of the run); the mean
	// share of machines each reached.
	Heartbeats, HeartbeatsToAll       int
	HeartbeatReach                    float64
	Announcements, AnnouncementsToAll int
	// Ledger entries written within the window, how many every machine
	// has by the end, and the time each took to reach the last machine.
	Entries, EntriesToAll         int
	EntryReachMean, EntryReachMax time.Duration
	// Per machine and second: messages and bytes sent and received.
	SentMsgs, SentBytes, RecvMsgs, RecvBytes Spread
	// Per machine and second, by category (heartbeat, ledger, ihave,
	// iwant, sync): the mean of sent messages and bytes.
	ByCategory map[string][2]float64
	// The share of one core a machine spends, from this run's measured
	// costs: on the checks of the messages it accepts (each once), and on
	// the fold (a folder's, with ledger.Log's re-folds).
	CheckCPU, FoldCPU float64
}

// Spread is a figure over the machines: mean, median, 99th percentile and
// most.
type Spread struct{ Mean, P50, P99, Max float64 }

func spread(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Spread{Mean: sum / float64(len(s)), P50: s[len(s)/2], P99: s[min(len(s)-1, len(s)*99/100)], Max: s[len(s)-1]}
}

func (w *world) report() *Report {
	r := &Report{Config: w.cfg, Events: w.nEv, Simulated: w.now, Rejected: w.rejected, Reordered: w.reordered, Stale: w.stale,
		Fetches: w.fetches}
	mean := func(c checkCost) time.Duration {
		if c.n == 0 {
			return 0
		}
		return c.sum / time.Duration(c.n)
	}
	r.CheckHeartbeat, r.CheckHeads, r.Fold = mean(w.checkCPU[tHeartbeat]), mean(w.checkCPU[tLedger]), mean(w.foldCPU)
	for _, m := range w.ms {
		r.MeanConns += float64(len(m.conns))
		r.MeanMesh += float64(len(m.mesh[0])+len(m.mesh[1])) / 2
	}
	r.MeanConns /= float64(len(w.ms))
	r.MeanMesh /= float64(len(w.ms))
	n := int32(len(w.ms))
	if j := w.job; j != nil {
		e := w.ents[j.entry]
		if e.reached == n {
			r.JobEntryReach = e.lastAt - e.at
		}
		for _, msg := range w.msgs {
			if msg.topic == tLedger && msg.heads != nil && slices.Contains(msg.heads.pushed, j.entry) && int(msg.origin) == 0 {
				r.JobEntryHops = int(msg.hops)
				break
			}
		}
		if j.seenDone > 0 {
			r.JobFirstDone = j.doneAt - j.submitted
		}
		if j.allDoneAt > 0 {
			r.JobAllDone = j.allDoneAt - j.submitted
		}
		for _, k := range j.runs {
			if k > 1 {
				r.ItemsRunTwice++
			}
		}
	}
	for _, win := range w.windows {
		if !win.closed {
			w.closeWindow(win)
		}
		wr := WindowReport{Name: win.name, Seconds: (win.end - win.start).Seconds(), ByCategory: map[string][2]float64{}}
		var reach float64
		for _, msg := range w.msgs[win.msg0:win.msg1] {
			switch msg.topic {
			case tHeartbeat:
				wr.Heartbeats++
				reach += float64(msg.reached) / float64(n)
				if msg.reached == n {
					wr.HeartbeatsToAll++
				}
			case tLedger:
				wr.Announcements++
				if msg.reached == n {
					wr.AnnouncementsToAll++
				}
			}
		}
		if wr.Heartbeats > 0 {
			wr.HeartbeatReach = reach / float64(wr.Heartbeats)
		}
		if wr.Seconds > 0 {
			wr.CheckCPU = (float64(wr.Heartbeats)*r.CheckHeartbeat.Seconds() + float64(wr.Announcements)*r.CheckHeads.Seconds()) / wr.Seconds
			if w.cfg.Folders > 0 {
				wr.FoldCPU = (win.fold1 - win.fold0).Seconds() / float64(w.cfg.Folders) / wr.Seconds
			}
		}
		var sum time.Duration
		for _, e := range w.ents[win.ent0:win.ent1] {
			wr.Entries++
			if e.reached == n {
				wr.EntriesToAll++
				d := e.lastAt - e.at
				sum += d
				wr.EntryReachMax = max(wr.EntryReachMax, d)
			}
		}
		if wr.EntriesToAll > 0 {
			wr.EntryReachMean = sum / time.Duration(wr.EntriesToAll)
		}
		if wr.Seconds > 0 {
			var sm, sb, rm, rb []float64
			var cat [nCats][2]float64
			for i := range w.ms {
				tx, rx := sub(win.tx1[i], win.tx0[i]), sub(win.rx1[i], win.rx0[i])
				var a, b, c, d int64
				for k := 0; k < nCats; k++ {
					a += tx.msgs[k]
					b += tx.bytes[k]
					c += rx.msgs[k]
					d += rx.bytes[k]
					cat[k][0] += float64(tx.msgs[k])
					cat[k][1] += float64(tx.bytes[k])
				}
				sm, sb = append(sm, float64(a)/wr.Seconds), append(sb, float64(b)/wr.Seconds)
				rm, rb = append(rm, float64(c)/wr.Seconds), append(rb, float64(d)/wr.Seconds)
			}
			wr.SentMsgs, wr.SentBytes, wr.RecvMsgs, wr.RecvBytes = spread(sm), spread(sb), spread(rm), spread(rb)
			for k := 0; k < nCats; k++ {
				wr.ByCategory[catNames[k]] = [2]float64{cat[k][0] / float64(n) / wr.Seconds, cat[k][1] / float64(n) / wr.Seconds}
			}
		}
		r.Windows = append(r.Windows, wr)
	}
	return r
}

func sub(a, b counter) counter {
	for k := 0; k < nCats; k++ {
		a.msgs[k] -= b.msgs[k]
		a.bytes[k] -= b.bytes[k]
	}
	return a
}

// Write prints the report for people.
func (r *Report) Write(out io.Writer) error {
	c := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "%d machines, %d slots each; heartbeat every %s; about %.0f connections and a mesh of %.1f per topic each (D %d..%d, lazy %d, %s)\n",
		c.Machines, c.Slots, c.Interval, r.MeanConns, r.MeanMesh, c.Dlo, c.Dhi, c.Dlazy, map[bool]string{true: "mesh publishing", false: "flood publishing"}[c.MeshPublish])
	fmt.Fprintf(&b, "link latency %s, uplink %.0f Mbit/s; %s of virtual time, %d events; %d folders\n",
		c.Latency, c.Bandwidth*8/1e6, r.Simulated.Round(time.Second), r.Events, c.Folders)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "window\tseconds\theartbeats\tto all\tannouncements\tto all\tentries\tto all\treach mean\treach max\tchecks CPU\tfold CPU\t")
	for _, w := range r.Windows {
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%.1f%%\t%.1f%%\t\n", w.Name, w.Seconds, w.Heartbeats, w.HeartbeatsToAll, w.Announcements,
			w.AnnouncementsToAll, w.Entries, w.EntriesToAll, w.EntryReachMean.Round(time.Millisecond), w.EntryReachMax.Round(time.Millisecond),
			100*w.CheckCPU, 100*w.FoldCPU)
	}
	tw.Flush()
	fmt.Fprintln(&b, "per machine and second (mean / median / p99 / max):")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "window\tsent msgs\tsent KB\treceived msgs\treceived KB\t")
	kb := func(s Spread) Spread { return Spread{s.Mean / 1e3, s.P50 / 1e3, s.P99 / 1e3, s.Max / 1e3} }
	sp := func(s Spread) string { return fmt.Sprintf("%.1f / %.1f / %.1f / %.1f", s.Mean, s.P50, s.P99, s.Max) }
	for _, w := range r.Windows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", w.Name, sp(w.SentMsgs), sp(kb(w.SentBytes)), sp(w.RecvMsgs), sp(kb(w.RecvBytes)))
	}
	tw.Flush()
	fmt.Fprintln(&b, "sent per machine and second, by category (messages, KB):")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "window\t")
	for _, k := range catNames {
		fmt.Fprintf(tw, "%s\t", k)
	}
	fmt.Fprintln(tw)
	for _, w := range r.Windows {
		fmt.Fprintf(tw, "%s\t", w.Name)
		for _, k := range catNames {
			v := w.ByCategory[k]
			fmt.Fprintf(tw, "%.1f, %.1f\t", v[0], v[1]/1e3)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if c.JobItems > 0 {
		fmt.Fprintf(&b, "job of %d items of %s: its entry reached every machine in %s (%d hops); first machine saw it done after %s, the last after %s; %d items run twice; %d fetches\n",
			c.JobItems, c.ItemTime, r.JobEntryReach.Round(time.Microsecond), r.JobEntryHops, r.JobFirstDone.Round(time.Millisecond),
			r.JobAllDone.Round(time.Millisecond), r.ItemsRunTwice, r.Fetches)
	}
	fmt.Fprintf(&b, "measured: checks of a heartbeat %s, of a heads announcement %s; fold of an entry %s; dropped: %d rejected, %d reordered heartbeats, %d stale announcements\n",
		r.CheckHeartbeat.Round(time.Microsecond), r.CheckHeads.Round(time.Microsecond), r.Fold.Round(time.Microsecond), r.Rejected, r.Reordered, r.Stale)
	_, err := io.WriteString(out, b.String())
	return err
}
