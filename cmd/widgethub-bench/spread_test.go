package main

import (
	"strings"
	"testing"
)

func TestParseWALWrites(t *testing.T) {
	// The lines around it, as etcd writes them: the histogram's buckets and
	// sum, and a metric whose name it begins with.
	metrics := `# TYPE etcd_disk_wal_write_duration_seconds histogram
etcd_disk_wal_write_duration_seconds_bucket{le="0.001"} 17400
etcd_disk_wal_write_duration_seconds_sum 0.0078
etcd_disk_wal_write_duration_seconds_count_total 3
etcd_disk_wal_write_duration_seconds_count 17426
`
	n, err := parseWALWrites(strings.NewReader(metrics))
	if err != nil || n != 17426 {
		t.Fatalf("got %v, %v; want 17426", n, err)
	}
	if _, err := parseWALWrites(strings.NewReader("etcd_disk_wal_fsync_duration_seconds_count 2\n")); err == nil {
		t.Fatal("metrics without the WAL's writes were accepted")
	}
}

func TestWriteMarkdownKeepsAPipeInsideItsCell(t *testing.T) {
	var out strings.Builder
	rows := [][]string{{"measurement", "result"}, {"spread", "on 1 | spread"}}
	writeMarkdown(&out, rows)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if cells := strings.Count(last, "|") - strings.Count(last, `\|`); cells != 3 {
		t.Fatalf("the row %q has %d cell borders, want 3", last, cells)
	}
	if rows[1][1] != "on 1 | spread" {
		t.Fatalf("writeMarkdown changed its input: %q", rows[1][1])
	}
}
