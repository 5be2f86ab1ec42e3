// Command plot renders the scale benchmark's results (hack/scale) as two
// PNGs: resident memory and the median /metrics scrape time against the
// number of pods, one line per exporter.
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
		} `json:"exporters"`
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
	var ticks []plot.Tick
	rss := map[string]plotter.XYs{}
	scrape := map[string]plotter.XYs{}
	for _, s := range r.Sizes {
		ticks = append(ticks, plot.Tick{Value: float64(s.Pods) / 1000, Label: fmt.Sprintf("%gk", float64(s.Pods)/1000)})
		for _, e := range s.Exporters {
			if _, ok := rss[e.Name]; !ok {
				names = append(names, e.Name)
			}
			x := float64(s.Pods) / 1000
			rss[e.Name] = append(rss[e.Name], plotter.XY{X: x, Y: float64(e.RSSAfterScrapesBytes) / 1e6})
			if e.ScrapeP50 != nil && !math.IsNaN(*e.ScrapeP50) {
				scrape[e.Name] = append(scrape[e.Name], plotter.XY{X: x, Y: *e.ScrapeP50})
			}
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "Resident memory (after 20 scrapes)"
	p.X.Label.Text = "pods"
	p.X.Min = 0
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Label.Text = "RSS (MB)"
	p.Y.Min = 0
	if err := lines(p, names, rss); err != nil {
		return err
	}
	if err := p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(out, "scale-rss.png")); err != nil {
		return err
	}

	p = plot.New()
	p.Title.Text = "/metrics scrape time, median of 20 (log scale)"
	p.X.Label.Text = "pods"
	p.X.Min = 0
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Label.Text = "seconds"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	if err := lines(p, names, scrape); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(out, "scale-scrape.png"))
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
