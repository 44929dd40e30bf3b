package main

import (
	"strings"
	"testing"
)

const stream = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: passing detail\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.1}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:7: why it failed\n"}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":0.2}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: no kubectl\n"}
{"Action":"skip","Package":"p","Test":"TestC","Elapsed":0}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.3s\n"}
{"Action":"fail","Package":"p","Elapsed":0.3}
`

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wanted   []string
		ci       bool
		code     int
		contains []string
		absent   []string
	}{
		{name: "a failed test's output is shown, a passed one's is not", code: 1,
			contains: []string{"why it failed", "FAIL\tp\t0.3s", "package times"}, absent: []string{"passing detail"}},
		{name: "a wanted test that did not run fails the run", wanted: []string{"TestA", "TestRenamed"}, code: 1,
			contains: []string{"TestRenamed did not run"}, absent: []string{"TestA did not run"}},
		{name: "a skip fails the run in CI", ci: true, code: 1, contains: []string{"1 tests skipped with CI=true", "p TestC"}},
		{name: "a skip outside CI is only shown", code: 1, contains: []string{"no kubectl"}, absent: []string{"skipped with CI=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			r := newReport(&out)
			r.read(strings.NewReader(stream))
			// The go command exited 1 for TestB.
			if code := r.finish(1, tc.wanted, tc.ci); code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			for _, s := range tc.contains {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(out.String(), s) {
					t.Errorf("output has %q:\n%s", s, out.String())
				}
			}
		})
	}
}

func TestReportPassesACleanRunAndFailsOnlyOnWhatItChecks(t *testing.T) {
	clean := `{"Action":"run","Package":"q","Test":"TestA"}
{"Action":"pass","Package":"q","Test":"TestA","Elapsed":0.1}
{"Action":"output","Package":"q","Output":"ok  \tq\t0.1s\n"}
{"Action":"pass","Package":"q","Elapsed":0.1}
`
	var out strings.Builder
	r := newReport(&out)
	r.read(strings.NewReader(clean))
	if code := r.finish(0, []string{"TestA"}, true); code != 0 {
		t.Fatalf("exit code %d for a clean run, want 0:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "ok  \tq\t0.1s") {
		t.Errorf("the package's closing line is missing:\n%s", out.String())
	}
	r = newReport(&out)
	r.read(strings.NewReader(clean))
	if code := r.finish(0, []string{"TestA", "TestGone"}, false); code != 1 {
		t.Errorf("exit code %d with a wanted test missing, want 1", code)
	}
	// A skip in a run the go command passed: only CI=true fails it.
	skipped := clean + `{"Action":"run","Package":"q","Test":"TestS"}
{"Action":"skip","Package":"q","Test":"TestS","Elapsed":0}
`
	for _, ci := range []bool{false, true} {
		r = newReport(&out)
		r.read(strings.NewReader(skipped))
		if code, want := r.finish(0, nil, ci), map[bool]int{false: 0, true: 1}[ci]; code != want {
			t.Errorf("exit code %d for a passed run with a skip, CI=%v; want %d", code, ci, want)
		}
	}
}
