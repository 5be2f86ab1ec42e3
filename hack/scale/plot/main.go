// Command plot renders the scale benchmark's results (hack/scale) as PNGs
// against the number of pods, one line per exporter: resident memory
// (scale-rss.png), the median /metrics scrape time (scale-scrape.png), the
// net CPU time per 1,000 pod updates (scale-cpu.png) and, for the sizes
// measured with --restart, the time from a restart to a complete /metrics
// (scale-restart.png).
//
//	go run ./plot --in results/results.json --out ../../docs/img
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// results is the part of hack/scale's JSON that the plots need.
type results struct {
	Sizes []struct {
		Pods      int `json:"pods"`
		Exporters []struct {
			Name                 string   `json:"name"`
			RSSAfterScrapesBytes int64    `json:"rssAfterScrapesBytes"`
			ScrapeP50            *float64 `json:"scrapeP50"`
			CPU                  struct {
				Updates     int     `json:"updates"`
				PerThousand float64 `json:"perThousand"`
			} `json:"cpu"`
		} `json:"exporters"`
		Restarts []struct {
			Name            string  `json:"name"`
			CompleteSeconds float64 `json:"completeSeconds"`
		} `json:"restarts"`
	} `json:"sizes"`
}

func main() {
	in := flag.String("in", "results/results.json", "results of hack/scale")
	out := flag.String("out", "../../docs/img", "directory of the PNGs")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(r.Sizes) == 0 {
		return errors.New(in + ": no sizes measured")
	}
	// One line per exporter, in the order of the results; an x tick at
	// every measured size.
	var names []string
	var ticks, restartTicks []plot.Tick
	rss := map[string]plotter.XYs{}
	scrape := map[string]plotter.XYs{}
	cpu := map[string]plotter.XYs{}
	restart := map[string]plotter.XYs{}
	for _, s := range r.Sizes {
		x := float64(s.Pods) / 1000
		tick := plot.Tick{Value: x, Label: fmt.Sprintf("%gk", x)}
		ticks = append(ticks, tick)
		for _, e := range s.Exporters {
			if _, ok := rss[e.Name]; !ok {
				names = append(names, e.Name)
			}
			rss[e.Name] = append(rss[e.Name], plotter.XY{X: x, Y: float64(e.RSSAfterScrapesBytes) / 1e6})
			if e.ScrapeP50 != nil && !math.IsNaN(*e.ScrapeP50) {
				scrape[e.Name] = append(scrape[e.Name], plotter.XY{X: x, Y: *e.ScrapeP50})
			}
			// No updates: the run ended before the burst.
			if e.CPU.Updates > 0 {
				cpu[e.Name] = append(cpu[e.Name], plotter.XY{X: x, Y: e.CPU.PerThousand})
			}
		}
		if len(s.Restarts) > 0 {
			restartTicks = append(restartTicks, tick)
		}
		for _, rs := range s.Restarts {
			restart[rs.Name] = append(restart[rs.Name], plotter.XY{X: x, Y: rs.CompleteSeconds})
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	charts := []chart{
		{file: "scale-rss.png", title: "Resident memory after 20 scrapes (log scale)", y: "RSS (MB)", ticks: ticks, xys: rss, log: true},
		{file: "scale-scrape.png", title: "/metrics scrape time, median of 20 (log scale)", y: "seconds", ticks: ticks, xys: scrape, log: true},
		// kube-state-metrics' line starts at the top left; the CPU per
		// update changes little with the pods, which leaves the bottom to
		// the legend.
		{file: "scale-cpu.png", title: "CPU per 1,000 pod updates, net of idle", y: "CPU seconds", ticks: ticks, xys: cpu, legendBottom: true},
	}
	if len(restartTicks) > 0 {
		charts = append(charts, chart{file: "scale-restart.png", title: "Restart (SIGKILL) to a complete /metrics", y: "seconds", ticks: restartTicks, xys: restart})
	} else {
		// Measured without --restart: no plot, rather than an empty one.
		fmt.Fprintln(os.Stderr, "plot: no restarts measured, scale-restart.png not written")
	}
	for _, c := range charts {
		if err := c.save(names, filepath.Join(out, c.file)); err != nil {
			return err
		}
	}
	return nil
}

// chart is one PNG: a line per exporter against the pods.
type chart struct {
	file, title, y string
	ticks          []plot.Tick
	xys            map[string]plotter.XYs
	// log scales the y axis; otherwise it starts at 0.
	log bool
	// legendBottom puts the legend at the bottom left instead of the top
	// left.
	legendBottom bool
}

func (c chart) save(names []string, path string) error {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text = "pods"
	p.X.Min = 0
	p.X.Tick.Marker = plot.ConstantTicks(c.ticks)
	if n := len(c.ticks); n > 1 && c.ticks[n-1].Value >= 20*c.ticks[0].Value {
		// Sizes a hundred times apart (1k to 100k): on a linear axis the
		// small ones, where most clusters are, would be one point.
		p.X.Label.Text = "pods (log scale)"
		p.X.Scale = plot.LogScale{}
		p.X.Min = c.ticks[0].Value / 1.5
		p.X.Max = c.ticks[n-1].Value * 1.5
	}
	p.Y.Label.Text = c.y
	if c.log {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	} else {
		p.Y.Min = 0
	}
	if err := lines(p, names, c.xys); err != nil {
		return err
	}
	p.Legend.Top = !c.legendBottom
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}

func lines(p *plot.Plot, names []string, xys map[string]plotter.XYs) error {
	var args []any
	for _, n := range names {
		if len(xys[n]) > 0 {
			args = append(args, n, xys[n])
		}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return plotutil.AddLinePoints(p, args...)
}
