// Command table writes the version matrix of docs/compatibility.md from
// the `go test -json` output hack/versions/matrix.sh keeps per version:
// one row per real-node test, one column per Kubernetes version.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	beginMarker = "<!-- matrix begin: written by hack/versions/matrix.sh -->"
	endMarker   = "<!-- matrix end -->"
)

// event is the part of test2json's output the table reads.
type event struct {
	Action  string
	Test    string
	Elapsed float64
	Output  string
}

// result is one top-level test's outcome on one version.
type result struct {
	action  string // pass, fail or skip
	elapsed float64
	// firstFailure is the first line of output that reports an error, for
	// the footnotes.
	firstFailure string
}

// parse reads test2json output and returns the outcome of each top-level
// test. A test that started but has no outcome (the binary died, or timed
// out) is "fail".
func parse(r io.Reader) (map[string]*result, error) {
	out := map[string]*result{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("test2json line %q: %w", line, err)
		}
		if e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		r := out[e.Test]
		if r == nil {
			r = &result{action: "fail"}
			out[e.Test] = r
		}
		switch e.Action {
		case "pass", "fail", "skip":
			r.action, r.elapsed = e.Action, e.Elapsed
		case "output":
			if r.firstFailure == "" && isFailureLine(e.Output) {
				r.firstFailure = strings.TrimSpace(e.Output)
			}
		}
	}
	return out, sc.Err()
}

// isFailureLine tells a line of `go test` output that reports an error
// (testing's "file.go:N: ..." lines with an error word, or testify's).
func isFailureLine(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "Error Trace:") || strings.HasPrefix(s, "Error:") ||
		(strings.Contains(s, ".go:") && (strings.Contains(s, "want") || strings.Contains(s, "error") || strings.Contains(s, "no ")))
}

// render writes the matrix as a Markdown table, with a footnote per
// failure.
func render(versions []string, results map[string]map[string]*result) string {
	tests := map[string]bool{}
	for _, rs := range results {
		for t := range rs {
			tests[t] = true
		}
	}
	names := make([]string, 0, len(tests))
	for t := range tests {
		names = append(names, t)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("| test |")
	for _, v := range versions {
		fmt.Fprintf(&b, " %s |", v)
	}
	b.WriteString("\n|---|")
	for range versions {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	var notes []string
	for _, t := range names {
		fmt.Fprintf(&b, "| `%s` |", t)
		for _, v := range versions {
			r := results[v][t]
			switch {
			case results[v] == nil:
				b.WriteString(" not run |")
			case r == nil:
				b.WriteString(" absent |")
			case r.action == "pass":
				fmt.Fprintf(&b, " pass (%.0f s) |", r.elapsed)
			default:
				notes = append(notes, fmt.Sprintf("%s on %s: %s", t, v, orNone(r.firstFailure)))
				fmt.Fprintf(&b, " **%s** [%d] |", r.action, len(notes))
			}
		}
		b.WriteString("\n")
	}
	for i, n := range notes {
		fmt.Fprintf(&b, "\n[%d] %s\n", i+1, n)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "no error line (see the version's results file)"
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

// replaceBetween puts table between the markers of doc.
func replaceBetween(doc, table string) (string, error) {
	i, j := strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return "", errors.New("markers not found: " + beginMarker + " ... " + endMarker)
	}
	return doc[:i+len(beginMarker)] + "\n\n" + table + "\n" + doc[j:], nil
}

func main() {
	dir := flag.String("results", "hack/versions/results", "directory of <version>.json")
	docPath := flag.String("doc", "docs/compatibility.md", "document whose matrix section is rewritten")
	flag.Parse()
	if err := run(*dir, *docPath, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
}

func run(dir, docPath string, versions []string) error {
	if len(versions) == 0 {
		return errors.New("no versions given")
	}
	results := map[string]map[string]*result{}
	for _, v := range versions {
		f, err := os.Open(filepath.Join(dir, v+".json"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		rs, err := parse(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		results[v] = rs
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	out, err := replaceBetween(string(doc), render(versions, results))
	if err != nil {
		return fmt.Errorf("%s: %w", docPath, err)
	}
	return os.WriteFile(docPath, []byte(out), 0o644)
}
