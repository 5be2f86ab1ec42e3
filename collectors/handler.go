package collectors

import (
	"bufio"
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
func Handler(reg *prometheus.Registry, perPod *PerPod, keep *FamilyFilter, log *slog.Logger) http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs, err := reg.Gather()
		if err != nil {
			log.Error("Gathering metrics failed, serving the rest", "err", err)
		}
		mfs = keep.filter(mfs)
		format := expfmt.NegotiateIncludingOpenMetrics(r.Header)
		w.Header().Set("Content-Type", string(format))
		var out io.Writer = w
		if acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
			bw, wait := compressBehind(w)
			// Deferred first so that it runs last: the body is complete
			// only once the compressing goroutine is done with w.
			defer wait()
			defer bw.Flush()
			out = bw
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

// gzipChunk is what the renderer hands to the compressing goroutine at a
// time. At 64 KB the handoffs ate the gain (docs/benchmarks.md); it costs
// twice its size per gzip scrape in flight.
const gzipChunk = 512 << 10

// compressBehind returns a writer whose bytes reach w gzipped, compressed
// by another goroutine while the caller renders what follows: at 100k pods
// gzip is about a third of a scrape (docs/benchmarks.md), and with two
// cores it overlaps the rendering instead of adding to it. A write fails
// once w does (the scraper went away), which stops the rendering. wait
// closes the pipe and returns once the goroutine has written the gzip
// trailer; call it after flushing the writer, and before the handler
// returns.
func compressBehind(w io.Writer) (*bufio.Writer, func()) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The fastest level: at 100k pods the body is tens of MB, and
		// scrape latency matters more than bytes on the wire.
		// klauspost/compress's level 1 is the same format at a third of
		// compress/gzip's CPU, and smaller (docs/benchmarks.md).
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		// A buffer as large as the writer's: one read takes a whole
		// chunk, and the renderer goes on while it is compressed.
		_, err := io.CopyBuffer(gz, pr, make([]byte, gzipChunk))
		if err == nil {
			err = gz.Close()
		}
		// Unblocks the renderer with the error, if there was one.
		pr.CloseWithError(err)
	}()
	return bufio.NewWriterSize(pw, gzipChunk), func() {
		pw.Close()
		<-done
	}
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
