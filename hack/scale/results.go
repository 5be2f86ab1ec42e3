package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/podslo/podslo/hack/harness"
)

// Results is the JSON the benchmark writes and ./plot reads.
type Results struct {
	Started  time.Time       `json:"started"`
	Finished time.Time       `json:"finished"`
	Machine  harness.Machine `json:"machine"`
	Versions Versions        `json:"versions"`
	Options  *Options        `json:"options"`
	Idle     []IdleResult    `json:"idle,omitempty"`
	Sizes    []SizeResult    `json:"sizes"`
}

// IdleResult is one exporter started and quiet, before the first pod: its
// cost on an empty cluster, the base the sizes grow from.
type IdleResult struct {
	Name         string `json:"name"`
	RSSBytes     int64  `json:"rssBytes"`     // VmRSS once quiet
	PeakRSSBytes int64  `json:"peakRSSBytes"` // VmHWM then: the start's peak
	// RssFile and RssAnon then: the binary's and other files' mapped
	// pages, and the rest (heap, stacks).
	FileRSSBytes int64 `json:"fileRSSBytes,omitempty"`
	AnonRSSBytes int64 `json:"anonRSSBytes,omitempty"`
}

// Versions are harness.Versions and kube-state-metrics'.
type Versions struct {
	harness.Versions
	KubeStateMetrics string `json:"kubeStateMetrics"`
}

type SizeResult struct {
	Pods         int    `json:"pods"`
	Nodes        int    `json:"nodes"`
	LoadAvgStart string `json:"loadAvgStart"`
	LoadAvgEnd   string `json:"loadAvgEnd"`
	Growth       struct {
		PodsBefore       int     `json:"podsBefore"`
		CreateSeconds    float64 `json:"createSeconds"`    // create and bind the new pods
		CreatedPerSecond float64 `json:"createdPerSecond"` // pods created and bound per second
		ReadySeconds     float64 `json:"readySeconds"`     // from the first new node to every pod Ready and every exporter quiet
	} `json:"growth"`
	Exporters []*ExporterResult `json:"exporters"`
	Delays    []DelayResult     `json:"delays"`
	// Restarts, with --restart: each exporter in turn, after the other
	// measurements of the size.
	Restarts []RestartResult `json:"restarts,omitempty"`
}

type ExporterResult struct {
	Name                 string `json:"name"`
	RSSSettledBytes      int64  `json:"rssSettledBytes"`      // VmRSS once every pod is Ready and the exporter quiet
	RSSAfterScrapesBytes int64  `json:"rssAfterScrapesBytes"` // VmRSS after the timed scrapes
	PeakRSSBytes         int64  `json:"peakRSSBytes"`         // VmHWM: the peak since start, growth included
	StateDirBytes        int64  `json:"stateDirBytes,omitempty"`
	StateDirDiskBytes    int64  `json:"stateDirDiskBytes,omitempty"`
	Series               int    `json:"series"`
	// Memcg is set with --podslo-memory-limit, for podslo.
	Memcg     *MemcgResult `json:"memcg,omitempty"`
	CPU       CPUResult    `json:"cpu"`
	Scrapes   []scrape     `json:"scrapes"`
	ScrapeP50 seconds      `json:"scrapeP50"`
	ScrapeP99 seconds      `json:"scrapeP99"`
}

// MemcgResult is one podslo's memory cgroup since the process started.
type MemcgResult struct {
	CgroupVersion int    `json:"cgroupVersion"`
	Limit         string `json:"limit"` // as given, e.g. 512Mi
	LimitBytes    int64  `json:"limitBytes"`
	GOMEMLIMIT    int64  `json:"gomemlimit"` // 90% of LimitBytes, as the chart sets it
	OOMKills      int64  `json:"oomKills"`   // oom_kill in memory.oom_control (v1) or memory.events (v2)
	// LimitHits counts the times usage reached the limit (v1
	// memory.failcnt, v2 max in memory.events): at the limit, the kernel
	// reclaims page cache, and a group with no more to reclaim thrashes or
	// is OOM-killed.
	LimitHits int64 `json:"limitHits"`
	// PeakUsageBytes is the group's peak charge (memory.max_usage_in_bytes,
	// v2 memory.peak), page cache included: reclaimable, it can reach the
	// limit without harm.
	PeakUsageBytes int64 `json:"peakUsageBytes"`
	// The working set, as the kubelet computes it: usage less inactive
	// file pages. Settled and after the scrapes as for RSS; the peak is
	// the largest of WorkingSetSamples samples, one every 250 ms.
	WorkingSetSettledBytes      int64 `json:"workingSetSettledBytes"`
	WorkingSetAfterScrapesBytes int64 `json:"workingSetAfterScrapesBytes"`
	PeakWorkingSetBytes         int64 `json:"peakWorkingSetBytes"`
	WorkingSetSamples           int   `json:"workingSetSamples"`
}

// RestartResult is one exporter SIGKILLed and started again, podslo on the
// same state (kube-state-metrics has none: it lists every pod again),
// measured from the restart.
type RestartResult struct {
	Name string `json:"name"`
	// From the start to ready: podslo's /readyz (informers synced), or
	// kube-state-metrics' /healthz, which answers as soon as it listens and
	// says nothing of its stores. Then to the end of the first scrape of a
	// /metrics that shows every Ready pod, scraped back-to-back: what a
	// Prometheus scraping then would have.
	ReadySeconds    float64 `json:"readySeconds"`
	CompleteSeconds float64 `json:"completeSeconds"`
	// VmRSS once /metrics is complete and again once quiet; VmHWM then.
	RSSCompleteBytes int64 `json:"rssCompleteBytes"`
	RSSQuietBytes    int64 `json:"rssQuietBytes"`
	PeakRSSBytes     int64 `json:"peakRSSBytes"`
	// Memcg is the new process's cgroup (a new group, as a restarted
	// container gets), with the settled working set read once complete
	// and the after-scrapes one once quiet.
	Memcg *MemcgResult `json:"memcg,omitempty"`
}

type CPUResult struct {
	Updates       int     `json:"updates"`
	PatchSeconds  float64 `json:"patchSeconds"`  // to send every PATCH
	WindowSeconds float64 `json:"windowSeconds"` // first PATCH to the exporter quiet
	GrossSeconds  float64 `json:"grossSeconds"`  // CPU over the window
	// CPU use with nothing happening, over idleWindow before the burst
	// and after the exporter went quiet.
	IdleCoresBefore  float64 `json:"idleCoresBefore"`
	IdleCoresAfter   float64 `json:"idleCoresAfter"`
	GrossPerThousand float64 `json:"grossPerThousand"` // gross per 1,000 updates
	PerThousand      float64 `json:"perThousand"`      // (gross - mean idle × window) per 1,000 updates
}

type DelayResult struct {
	Exporter        string    `json:"exporter"`
	Observable      string    `json:"observable"`
	Samples         []float64 `json:"samples"`
	Missed          int       `json:"missed"`
	P50             seconds   `json:"p50"`
	P99             seconds   `json:"p99"`
	MeanPollSeconds float64   `json:"meanPollSeconds"`
}

// seconds is a duration that may be unknown (NaN): null in JSON.
type seconds float64

func (s seconds) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(s)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(s))
}

func (s *seconds) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = seconds(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(s))
}

func describeVersions(ctx context.Context, o *Options) Versions {
	v := Versions{Versions: harness.DescribeVersions(ctx, o.Repo, o.Testbin, o.Kwokbin)}
	if o.KSM != "" {
		// make builds it into ksm-<version>/.
		v.KubeStateMetrics = strings.TrimPrefix(filepath.Base(filepath.Dir(o.KSM)), "ksm-")
	}
	return v
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func (r *Results) write(jsonPath, mdPath string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(jsonPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(mdPath), 0o755); err != nil {
		return err
	}
	return os.WriteFile(mdPath, r.markdown(), 0o644)
}

// markdown renders the idle RSS and one table per size, then the targets
// at the largest. Without kube-state-metrics (--ksm "") its column and the
// ratios are left out; the memory cgroup's rows and the restarts appear
// when measured.
func (r *Results) markdown() []byte {
	var b bytes.Buffer
	ksmVersion := "kube-state-metrics " + r.Versions.KubeStateMetrics
	if r.Options != nil && r.Options.KSM == "" {
		ksmVersion = "without kube-state-metrics"
	}
	fmt.Fprintf(&b, "Measured %s, %d CPUs (%s), %.0f GiB, Linux %s, %s; podslo %s, %s, Kubernetes %s, kwok %s.\n",
		r.Started.Format("2006-01-02"), r.Machine.CPUs, r.Machine.CPUModel, float64(r.Machine.MemBytes)/(1<<30), r.Machine.Kernel, r.Machine.Go,
		r.Versions.Podslo, ksmVersion, r.Versions.Kubernetes, r.Versions.Kwok)
	mb := func(v int64) float64 { return float64(v) / 1e6 }
	if len(r.Idle) > 0 {
		b.WriteString("\n### Idle, 0 pods: RSS (MB)\n\nEach exporter started and quiet, before the first pod. RSS is the binary's and other files' pages (file) and the rest (anonymous).\n\n| | RSS | file / anonymous | peak RSS since start |\n|---|---|---|---|\n")
		for _, i := range r.Idle {
			fmt.Fprintf(&b, "| %s | %.0f | %.0f / %.0f | %.0f |\n", i.Name, mb(i.RSSBytes), mb(i.FileRSSBytes), mb(i.AnonRSSBytes), mb(i.PeakRSSBytes))
		}
	}
	withKSM := r.Options == nil || r.Options.KSM != ""
	for _, s := range r.Sizes {
		on, off, k := s.exporter(podsloOn), s.exporter(podsloOff), s.exporter(ksm)
		if on == nil || off == nil || len(on.Scrapes) == 0 || len(off.Scrapes) == 0 || (withKSM && (k == nil || len(k.Scrapes) == 0)) {
			fmt.Fprintf(&b, "\n### %s pods: incomplete, see the JSON\n", thousands(s.Pods))
			continue
		}
		fmt.Fprintf(&b, "\n### %s pods on %s nodes\n\n", thousands(s.Pods), thousands(s.Nodes))
		fmt.Fprintf(&b, "Created and bound at %.0f pods/s; %.0f s from the first new node to every pod Ready and the exporters quiet. Load average %s at the start, %s at the end.\n\n",
			s.Growth.CreatedPerSecond, s.Growth.ReadySeconds, s.LoadAvgStart, s.LoadAvgEnd)
		// line writes a row: podslo's two cells, then kube-state-metrics'
		// and the two ratios when it ran.
		line := func(what, a, c, d, ra, rc string) {
			if withKSM {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", what, a, c, d, ra, rc)
			} else {
				fmt.Fprintf(&b, "| %s | %s | %s |\n", what, a, c)
			}
		}
		if withKSM {
			b.WriteString("| | podslo | podslo, no per-pod | kube-state-metrics | podslo / KSM | no per-pod / KSM |\n|---|---|---|---|---|---|\n")
		} else {
			b.WriteString("| | podslo | podslo, no per-pod |\n|---|---|---|\n")
		}
		row := func(what string, f func(*ExporterResult) float64, format string) {
			a, c := f(on), f(off)
			if !withKSM {
				line(what, fmt.Sprintf(format, a), fmt.Sprintf(format, c), "", "", "")
				return
			}
			d := f(k)
			line(what, fmt.Sprintf(format, a), fmt.Sprintf(format, c), fmt.Sprintf(format, d), ratio(a, d), ratio(c, d))
		}
		row("RSS settled (MB)", func(e *ExporterResult) float64 { return mb(e.RSSSettledBytes) }, "%.0f")
		row("RSS after the timed scrapes (MB)", func(e *ExporterResult) float64 { return mb(e.RSSAfterScrapesBytes) }, "%.0f")
		row("peak RSS since start (MB)", func(e *ExporterResult) float64 { return mb(e.PeakRSSBytes) }, "%.0f")
		if on.Memcg != nil && off.Memcg != nil {
			podsloRow := func(what string, f func(*MemcgResult) string) { line(what, f(on.Memcg), f(off.Memcg), "", "", "") }
			podsloRow("memory limit / GOMEMLIMIT (bytes)", func(m *MemcgResult) string {
				return fmt.Sprintf("%s / %d (cgroup v%d)", m.Limit, m.GOMEMLIMIT, m.CgroupVersion)
			})
			podsloRow("OOM kills", func(m *MemcgResult) string { return fmt.Sprint(m.OOMKills) })
			podsloRow("times at the limit (failcnt)", func(m *MemcgResult) string { return fmt.Sprint(m.LimitHits) })
			mib := func(v int64) string { return fmt.Sprintf("%.0f", mb(v)) }
			podsloRow("working set settled (MB)", func(m *MemcgResult) string { return mib(m.WorkingSetSettledBytes) })
			podsloRow("working set after the timed scrapes (MB)", func(m *MemcgResult) string { return mib(m.WorkingSetAfterScrapesBytes) })
			podsloRow("peak working set since start, sampled (MB)", func(m *MemcgResult) string { return mib(m.PeakWorkingSetBytes) })
			podsloRow("cgroup peak usage since start, page cache included (MB)", func(m *MemcgResult) string { return mib(m.PeakUsageBytes) })
		}
		row("CPU s per 1k pod updates, net of idle", func(e *ExporterResult) float64 { return e.CPU.PerThousand }, "%.3f")
		row("CPU s per 1k pod updates, gross", func(e *ExporterResult) float64 { return e.CPU.GrossPerThousand }, "%.3f")
		idle := func(e *ExporterResult) string {
			if e == nil {
				return ""
			}
			return fmt.Sprintf("%.3f / %.3f", e.CPU.IdleCoresBefore, e.CPU.IdleCoresAfter)
		}
		line("idle CPU (cores, before / after the updates)", idle(on), idle(off), idle(k), "", "")
		row("/metrics p50 (s)", func(e *ExporterResult) float64 { return float64(e.ScrapeP50) }, "%.3f")
		row("/metrics p99 (s)", func(e *ExporterResult) float64 { return float64(e.ScrapeP99) }, "%.3f")
		row("/metrics body (MB, as sent)", func(e *ExporterResult) float64 { return mb(e.Scrapes[0].Bytes) }, "%.1f")
		row("series", func(e *ExporterResult) float64 { return float64(e.Series) }, "%.0f")
		line("state dir (MB, apparent / on disk)", fmt.Sprintf("%.1f / %.1f", mb(on.StateDirBytes), mb(on.StateDirDiskBytes)),
			fmt.Sprintf("%.1f / %.1f", mb(off.StateDirBytes), mb(off.StateDirDiskBytes)), "", "", "")
		b.WriteString("\n| status change → metric | seen as | p50 (s) | p99 (s) | missed | mean poll (s) |\n|---|---|---|---|---|---|\n")
		for _, d := range s.Delays {
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %d | %.3f |\n", d.Exporter, d.Observable, d.P50, d.P99, d.Missed, d.MeanPollSeconds)
		}
		if len(s.Restarts) > 0 {
			ready := "/readyz"
			if withKSM {
				ready += ", KSM /healthz"
			}
			fmt.Fprintf(&b, "\n| restart (SIGKILL; podslo on the same state) | to %s (s) | to a complete /metrics (s) | RSS complete / quiet (MB) | quiet RSS / settled RSS | peak RSS (MB) |", ready)
			sep := "|---|---|---|---|---|---|"
			// The memory cgroup's columns as its rows above: with
			// --podslo-memory-limit only.
			memcg := on.Memcg != nil
			if memcg {
				b.WriteString(" working set complete / quiet / peak (MB) | cgroup peak usage (MB) | OOM kills |")
				sep += "---|---|---|"
			}
			b.WriteString("\n" + sep + "\n")
			for _, rs := range s.Restarts {
				// Quiet after the restart against settled before it, at
				// the same size: what the restart leaves behind.
				var settled float64
				if e := s.exporter(rs.Name); e != nil {
					settled = mb(e.RSSSettledBytes)
				}
				fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.0f / %.0f | %s | %.0f |", rs.Name, rs.ReadySeconds, rs.CompleteSeconds,
					mb(rs.RSSCompleteBytes), mb(rs.RSSQuietBytes), ratio(mb(rs.RSSQuietBytes), settled), mb(rs.PeakRSSBytes))
				if memcg {
					ws, peak, kills := "", "", ""
					if m := rs.Memcg; m != nil {
						ws = fmt.Sprintf("%.0f / %.0f / %.0f", mb(m.WorkingSetSettledBytes), mb(m.WorkingSetAfterScrapesBytes), mb(m.PeakWorkingSetBytes))
						peak, kills = fmt.Sprintf("%.0f", mb(m.PeakUsageBytes)), fmt.Sprint(m.OOMKills)
					}
					fmt.Fprintf(&b, " %s | %s | %s |", ws, peak, kills)
				}
				b.WriteString("\n")
			}
		}
	}
	return b.Bytes()
}

func (s *SizeResult) exporter(name string) *ExporterResult {
	for _, e := range s.Exporters {
		if e.Name == name {
			return e
		}
	}
	return nil
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return ""
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
