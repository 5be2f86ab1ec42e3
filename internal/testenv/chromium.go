package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// installChromium is how a Debian machine gets the browser; .ci/run does it.
const installChromium = "DEBIAN_FRONTEND=noninteractive apt-get install -yq --no-install-recommends chromium"

// ChromiumPath finds headless Chromium: $PODSLO_CHROMIUM, else chromium on
// the PATH. CI must render the pages, so a missing browser fails the test;
// only -short, which asks to skip what needs outside tools, skips it.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PODSLO_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err == nil {
		return p
	}
	if testing.Short() {
		t.Skip("chromium not found; install it (" + installChromium + ") or set PODSLO_CHROMIUM")
	}
	t.Fatalf("chromium not found (%v): install it (Debian: %s, as .ci/run does) or set PODSLO_CHROMIUM to its path", err, installChromium)
	return ""
}

// chromium runs headless Chromium on url with the given action flags.
// Chromium runs as root in CI containers, hence --no-sandbox; the other
// flags keep it off the network beyond url and out of the user's profile.
func chromium(t testing.TB, url string, action ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}, action...)
	cmd := exec.CommandContext(ctx, ChromiumPath(t), append(args, url)...)
	// Killed with the test binary too, not only when ctx ends.
	DieWithParent(cmd)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s %s: %v; stderr:\n%s", strings.Join(action, " "), url, err, stderr.String())
	}
	return stdout.String()
}

// DumpDOM loads url in headless Chromium and returns the DOM as the
// browser built it.
func DumpDOM(t testing.TB, url string) string {
	t.Helper()
	return chromium(t, url, "--dump-dom")
}

// HTMLTable reads the table of id off a page: its header cells and its
// rows' cells, as a reader sees them (an SVG's title is a tooltip, not
// text).
func HTMLTable(t testing.TB, page, id string) (header []string, rows [][]string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	for n := range doc.Descendants() {
		if n.DataAtom != atom.Table || attr(n, "id") != id {
			continue
		}
		for tr := range n.Descendants() {
			if tr.DataAtom != atom.Tr {
				continue
			}
			var cells []string
			th := false
			for c := range tr.ChildNodes() {
				if c.DataAtom == atom.Th || c.DataAtom == atom.Td {
					th = th || c.DataAtom == atom.Th
					cells = append(cells, VisibleText(c))
				}
			}
			if th {
				header = cells
			} else {
				rows = append(rows, cells)
			}
		}
		return header, rows
	}
	t.Fatalf("no table#%s in:\n%s", id, page)
	return nil, nil
}

// VisibleText is n's text with its spaces collapsed, leaving out what a
// reader does not see as text: an SVG's title.
func VisibleText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		if n.Data == "svg" {
			b.WriteString(" ")
			return
		}
		for c := range n.ChildNodes() {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
