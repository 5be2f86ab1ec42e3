package main

import (
	"strings"
	"testing"
)

func TestMarkdownWithoutKSM(t *testing.T) {
	memcg := func(peakWS int64) *MemcgResult {
		return &MemcgResult{CgroupVersion: 1, Limit: "512Mi", LimitBytes: 536870912, GOMEMLIMIT: 483183820,
			WorkingSetSettledBytes: 100e6, WorkingSetAfterScrapesBytes: 110e6, PeakWorkingSetBytes: peakWS, PeakUsageBytes: 300e6}
	}
	exp := func(name string, m *MemcgResult) *ExporterResult {
		return &ExporterResult{Name: name, RSSSettledBytes: 90e6, Scrapes: []scrape{{Bytes: 1e6}}, Memcg: m}
	}
	r := &Results{Options: &Options{KSM: ""}, Sizes: []SizeResult{{
		Pods: 2000, Nodes: 20,
		Exporters: []*ExporterResult{exp(podsloOn, memcg(150e6)), exp(podsloOff, memcg(140e6))},
		Restarts:  []RestartResult{{Name: podsloOn, ReadySeconds: 1.5, CompleteSeconds: 2, RSSCompleteBytes: 120e6, RSSQuietBytes: 99e6, Memcg: memcg(160e6)}},
	}}}
	md := string(r.markdown())
	for _, want := range []string{
		"without kube-state-metrics",
		"| | podslo | podslo, no per-pod |\n|---|---|---|\n",
		"| RSS settled (MB) | 90 | 90 |\n",
		"| memory limit / GOMEMLIMIT (bytes) | 512Mi / 483183820 (cgroup v1) | 512Mi / 483183820 (cgroup v1) |\n",
		"| OOM kills | 0 | 0 |\n",
		"| times at the limit (failcnt) | 0 | 0 |\n",
		"| peak working set since start, sampled (MB) | 150 | 140 |\n",
		"| cgroup peak usage since start, page cache included (MB) | 300 | 300 |\n",
		"| restart (SIGKILL; podslo on the same state) | to /readyz (s) | to a complete /metrics (s) | RSS complete / quiet (MB) | quiet RSS / settled RSS | peak RSS (MB) | working set complete / quiet / peak (MB) | cgroup peak usage (MB) | OOM kills |\n|---|---|---|---|---|---|---|---|---|\n" +
			"| podslo | 1.5 | 2.0 | 120 / 99 | 1.10× | 0 | 100 / 110 / 160 | 300 | 0 |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "KSM") || strings.Contains(md, "incomplete") {
		t.Errorf("markdown without kube-state-metrics has a KSM column or an incomplete size:\n%s", md)
	}
}

func TestMarkdownWithKSM(t *testing.T) {
	exp := func(name string, rss int64) *ExporterResult {
		return &ExporterResult{Name: name, RSSSettledBytes: rss, Scrapes: []scrape{{Bytes: 1e6}}}
	}
	r := &Results{Options: &Options{KSM: "/ksm-v2.20.0/kube-state-metrics"},
		Idle: []IdleResult{{Name: podsloOn, RSSBytes: 20e6, PeakRSSBytes: 22e6, FileRSSBytes: 14e6, AnonRSSBytes: 6e6}, {Name: podsloOff, RSSBytes: 19e6, PeakRSSBytes: 21e6, FileRSSBytes: 13e6, AnonRSSBytes: 6e6}, {Name: ksm, RSSBytes: 15e6, PeakRSSBytes: 16e6, FileRSSBytes: 11e6, AnonRSSBytes: 4e6}},
		Sizes: []SizeResult{{
			Pods: 2000, Nodes: 20, Exporters: []*ExporterResult{exp(podsloOn, 50e6), exp(podsloOff, 40e6), exp(ksm, 200e6)},
			Restarts: []RestartResult{
				{Name: podsloOn, ReadySeconds: 0.5, CompleteSeconds: 0.7, RSSCompleteBytes: 60e6, RSSQuietBytes: 55e6, PeakRSSBytes: 70e6},
				{Name: ksm, ReadySeconds: 0.1, CompleteSeconds: 3.4, RSSCompleteBytes: 250e6, RSSQuietBytes: 300e6, PeakRSSBytes: 320e6},
			},
		}}}
	md := string(r.markdown())
	for _, want := range []string{
		"\n### Idle, 0 pods: RSS (MB)\n\nEach exporter started and quiet, before the first pod. RSS is the binary's and other files' pages (file) and the rest (anonymous).\n\n| | RSS | file / anonymous | peak RSS since start |\n|---|---|---|---|\n" +
			"| podslo | 20 | 14 / 6 | 22 |\n| podslo --per-pod-metrics=false | 19 | 13 / 6 | 21 |\n| kube-state-metrics | 15 | 11 / 4 | 16 |\n\n### 2,000 pods on 20 nodes\n",
		"| RSS settled (MB) | 50 | 40 | 200 | 0.25× | 0.20× |\n",
		"| restart (SIGKILL; podslo on the same state) | to /readyz, KSM /healthz (s) | to a complete /metrics (s) | RSS complete / quiet (MB) | quiet RSS / settled RSS | peak RSS (MB) |\n|---|---|---|---|---|---|\n" +
			"| podslo | 0.5 | 0.7 | 60 / 55 | 1.10× | 70 |\n| kube-state-metrics | 0.1 | 3.4 | 250 / 300 | 1.50× | 320 |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "OOM kills") {
		t.Errorf("markdown without a memory limit has cgroup rows or columns:\n%s", md)
	}
	// kube-state-metrics expected but missing: the size is incomplete.
	r.Sizes[0].Exporters = r.Sizes[0].Exporters[:2]
	if md := string(r.markdown()); !strings.Contains(md, "2,000 pods: incomplete") {
		t.Errorf("a size without kube-state-metrics' figures is not marked incomplete:\n%s", md)
	}
}
