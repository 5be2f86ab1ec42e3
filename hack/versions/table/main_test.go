package main

import (
	"strings"
	"testing"
)

func TestParseAndRender(t *testing.T) {
	v137 := `{"Action":"run","Test":"TestA"}
{"Action":"output","Test":"TestA","Output":"ok\n"}
{"Action":"pass","Test":"TestA","Elapsed":12.4}
{"Action":"run","Test":"TestB"}
{"Action":"run","Test":"TestB/sub"}
{"Action":"fail","Test":"TestB/sub","Elapsed":1}
{"Action":"output","Test":"TestB","Output":"    volumes_test.go:88: creation count: want 4, got 3\n"}
{"Action":"fail","Test":"TestB","Elapsed":30}
{"Action":"run","Test":"TestC"}
{"Action":"output","Test":"TestC","Output":"panic: test timed out\n"}
`
	rs, err := parse(strings.NewReader(v137))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("want 3 top-level tests, got %d: %v", len(rs), rs)
	}
	if rs["TestA"].action != "pass" || rs["TestB"].action != "fail" || rs["TestC"].action != "fail" {
		t.Fatalf("outcomes: A %s, B %s, C %s", rs["TestA"].action, rs["TestB"].action, rs["TestC"].action)
	}
	table := render([]string{"v1.36.3", "v1.37.2"}, map[string]map[string]*result{"v1.37.2": rs})
	for _, want := range []string{
		"| `TestA` | not run | pass (12 s) |",
		"| `TestB` | not run | **fail** [1] |",
		"| `TestC` | not run | **fail** [2] |",
		"[1] TestB on v1.37.2: `volumes_test.go:88: creation count: want 4, got 3`",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	doc := "intro\n" + beginMarker + "\nold\n" + endMarker + "\noutro\n"
	got, err := replaceBetween(doc, "new")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + beginMarker + "\n\nnew\n" + endMarker + "\noutro\n"; got != want {
		t.Errorf("replaceBetween: got %q, want %q", got, want)
	}
	if _, err := replaceBetween("no markers", "x"); err == nil {
		t.Error("a document without markers must be refused")
	}
}
