package fleet

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A process started within withGOMAXPROCS runs with its GOMAXPROCS; one
// started after it gets the environment as it was.
func TestGOMAXPROCSReachesOnlyWhatStartsWithin(t *testing.T) {
	t.Setenv("GOMAXPROCS", "7")
	childsProcs := func() string {
		out, err := exec.Command("sh", "-c", `echo "$GOMAXPROCS"`).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	var within string
	if err := withGOMAXPROCS(1, func() error { within = childsProcs(); return nil }); err != nil {
		t.Fatal(err)
	}
	if within != "1" {
		t.Errorf("a process started within ran with GOMAXPROCS=%q, want 1", within)
	}
	if after := childsProcs(); after != "7" {
		t.Errorf("a process started after ran with GOMAXPROCS=%q, want the 7 set before", after)
	}

	if err := os.Unsetenv("GOMAXPROCS"); err != nil {
		t.Fatal(err)
	}
	if err := withGOMAXPROCS(1, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		t.Errorf("GOMAXPROCS=%q is left set; it was unset before", v)
	}
	if err := withGOMAXPROCS(0, func() error { within = childsProcs(); return nil }); err != nil {
		t.Fatal(err)
	}
	if within != "" {
		t.Errorf("with 0 a process started within ran with GOMAXPROCS=%q, want Go's default (unset)", within)
	}
}
