package demo

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// progress draws one bar on a terminal, redrawn in place; elsewhere (a
// log file, CI) it prints a line per tenth so that logs stay readable.
type progress struct {
	mu      sync.Mutex
	out     io.Writer
	tty     bool
	label   string
	done    int
	total   int
	printed int // the last tenth printed off a terminal; -1 for none
}

func newProgress(out io.Writer, label string, total int) *progress {
	p := &progress{out: out, tty: isTerminal(out), label: label, total: max(total, 1), printed: -1}
	p.draw()
	return p
}

// add counts n more done, never beyond the total: the estimate of a
// build's packages can be short.
func (p *progress) add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = min(p.done+n, p.total)
	p.draw()
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = p.total
	p.draw()
	if p.tty {
		fmt.Fprintln(p.out)
	}
}

const barWidth = 30

func (p *progress) draw() {
	pct := p.done * 100 / p.total
	if !p.tty {
		if tenth := pct / 10; tenth > p.printed {
			p.printed = tenth
			fmt.Fprintf(p.out, "%s: %d%% (%d/%d)\n", p.label, pct, p.done, p.total)
		}
		return
	}
	filled := p.done * barWidth / p.total
	fmt.Fprintf(p.out, "\r%-40s [%s%s] %3d%% (%d/%d)", p.label, strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), pct, p.done, p.total)
}

// isTerminal is true for a character device, which is what a terminal is
// to a process; it is false for pipes and files.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
