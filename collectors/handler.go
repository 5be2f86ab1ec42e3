package collectors

import (
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Handler serves /metrics: the registry's families, then the per-pod ones
// (perPod may be nil), in the format the scraper negotiates, gzipped when it
// asks. A gathering error costs only the families it hit.
func Handler(reg *prometheus.Registry, perPod *PerPod, log *slog.Logger) http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs, err := reg.Gather()
		if err != nil {
			log.Error("Gathering metrics failed, serving the rest", "err", err)
		}
		format := expfmt.NegotiateIncludingOpenMetrics(r.Header)
		w.Header().Set("Content-Type", string(format))
		var out io.Writer = w
		if acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
			// The fastest level: at 100k pods the body is tens of MB, and
			// scrape latency matters more than bytes on the wire.
			// klauspost/compress's level 1 is the same format at a third
			// of compress/gzip's CPU, and smaller (docs/benchmarks.md).
			gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
			defer gz.Close()
			out = gz
		}
		enc := expfmt.NewEncoder(out, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				log.Error("Writing metrics failed", "family", mf.GetName(), "err", err)
				return
			}
		}
		if perPod != nil {
			if err := perPod.Write(out, format); err != nil {
				log.Error("Writing per-pod metrics failed", "err", err)
				return
			}
		}
		if closer, ok := enc.(expfmt.Closer); ok {
			// OpenMetrics ends with "# EOF", after the per-pod families.
			_ = closer.Close()
		}
	})
	return promhttp.InstrumentMetricHandler(reg, h)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(enc, "gzip") {
			return true
		}
	}
	return false
}
