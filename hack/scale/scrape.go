package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// client leaves bodies compressed: a timed scrape reads the bytes as they
// come off the wire, and decompressing them here would only slow the reader
// on a machine whose two cores the exporters need. Every request has its
// own connection (a handshake on loopback is negligible next to a scrape):
// a kept-alive connection that the server closed after minutes of quiet
// failed a scrape.
var client = &http.Client{
	Transport: &http.Transport{DisableCompression: true, DisableKeepAlives: true},
	Timeout:   5 * time.Minute,
}

// textAccept asks for the text format, which both exporters serve and
// Prometheus falls back to.
const textAccept = "text/plain;version=0.0.4"

// scrape is one timed GET /metrics.
type scrape struct {
	Seconds  float64 `json:"seconds"`
	Bytes    int64   `json:"bytes"`
	Encoding string  `json:"encoding"`
}

// timedScrape reads the whole body as Prometheus asks for it (text,
// Accept-Encoding: gzip) and times it from the request to the last byte.
func timedScrape(ctx context.Context, url string) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return scrape{}, err
	}
	req.Header.Set("Accept", textAccept)
	req.Header.Set("Accept-Encoding", "gzip")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return scrape{}, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	d := time.Since(start)
	if err != nil {
		return scrape{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return scrape{}, fmt.Errorf("GET %s/metrics: %s", url, resp.Status)
	}
	enc := resp.Header.Get("Content-Encoding")
	if enc == "" {
		enc = "identity"
	}
	return scrape{Seconds: d.Seconds(), Bytes: n, Encoding: enc}, nil
}

// scan streams /metrics uncompressed and calls fn on every line until fn
// returns true. It returns when that happened (zero if it never did).
func scan(ctx context.Context, url string, fn func(line []byte) bool) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Accept", textAccept)
	resp, err := client.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("GET %s/metrics: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if fn(sc.Bytes()) {
			// Closing the body early stops the transfer; the exporter's
			// remaining writes fail fast.
			return time.Now(), nil
		}
	}
	return time.Time{}, sc.Err()
}

// value is the sample value at the end of a text-format line.
func value(line []byte) float64 {
	i := bytes.LastIndexByte(line, ' ')
	v, err := strconv.ParseFloat(string(line[i+1:]), 64)
	if err != nil {
		return -1
	}
	return v
}

// exposition counts what a full scrape holds.
type exposition struct {
	Series int // sample lines
	// ReadyTrue counts kube_pod_status_ready{condition="true"} samples
	// equal to 1; Readiness sums podslo_readiness_duration_seconds_count.
	ReadyTrue int
	Readiness float64
}

var (
	ksmReady        = []byte("kube_pod_status_ready{")
	ksmTrue         = []byte(`condition="true"} 1`)
	podsloReadiness = []byte("podslo_readiness_duration_seconds_count{")
)

func count(ctx context.Context, url string) (exposition, error) {
	var e exposition
	_, err := scan(ctx, url, func(line []byte) bool {
		if len(line) == 0 || line[0] == '#' {
			return false
		}
		e.Series++
		switch {
		case bytes.HasPrefix(line, ksmReady) && bytes.HasSuffix(line, ksmTrue):
			e.ReadyTrue++
		case bytes.HasPrefix(line, podsloReadiness):
			e.Readiness += value(line)
		}
		return false
	})
	return e, err
}

// classCount is the number of sandbox creations podslo's /api/v1/classes
// shows for a runtime class.
func classCount(ctx context.Context, url, runtimeClass string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/classes", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s/api/v1/classes: %s", url, resp.Status)
	}
	var table struct {
		Rows []struct {
			Label string `json:"label"`
			Class string `json:"class"`
			Count uint64 `json:"count"`
		} `json:"rows"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		return 0, err
	}
	for _, r := range table.Rows {
		if r.Label == "runtime_class" && r.Class == runtimeClass {
			return r.Count, nil
		}
	}
	return 0, nil
}
