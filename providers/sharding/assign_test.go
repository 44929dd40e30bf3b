package sharding

import (
	"fmt"
	"maps"
	"testing"
)

func registrations(n int) []Registration {
	regs := make([]Registration, n)
	for i := range regs {
		regs[i] = Registration{Member: fmt.Sprintf("member-%04d", i)}
	}
	return regs
}

func loads(owners map[string]string) map[string]int {
	count := map[string]int{}
	for _, owner := range owners {
		count[owner]++
	}
	return count
}

func moved(before, after map[string]string) (n int, to map[string]int) {
	to = map[string]int{}
	for m, o := range before {
		if a, ok := after[m]; ok && a != o {
			n++
			to[a]++
		}
	}
	return n, to
}

func TestAssignGivesEveryReplicaItsFairShare(t *testing.T) {
	for _, tc := range []struct{ members, replicas int }{{60, 3}, {61, 3}, {100, 3}, {100, 4}, {1000, 7}, {5, 8}} {
		live := make([]string, tc.replicas)
		for i := range live {
			live[i] = fmt.Sprintf("replica-%d", i)
		}
		owners := Assign(registrations(tc.members), live)
		if len(owners) != tc.members {
			t.Fatalf("%d members on %d replicas: %d assigned", tc.members, tc.replicas, len(owners))
		}
		low, high := tc.members/tc.replicas, (tc.members+tc.replicas-1)/tc.replicas
		for _, replica := range live {
			if n := loads(owners)[replica]; n < low || n > high {
				t.Errorf("%d members on %d replicas: %s serves %d, want %d to %d", tc.members, tc.replicas, replica, n, low, high)
			}
		}
	}
}

func TestAssignMovesLittleMoreThanAJoinOrALeaveMust(t *testing.T) {
	for _, n := range []int{60, 100, 2000} {
		regs := registrations(n)
		three := Assign(regs, []string{"a", "b", "c"})
		four := Assign(regs, []string{"a", "b", "c", "d"})
		got, to := moved(three, four)
		// A quarter must move to d; allow a tenth of the members more.
		if need := n / 4; got < need || got > need+n/10 || to["d"] < need {
			t.Errorf("%d members: a 4th replica moved %d (%v), want about %d, all to d", n, got, to, need)
		}
		if got := Assign(regs, []string{"d", "c", "b", "a"}); !maps.Equal(got, four) {
			t.Errorf("%d members: the owners depend on the order of the live replicas", n)
		}
		two := Assign(regs, []string{"a", "c"})
		got, _ = moved(three, two)
		if had := loads(three)["b"]; got < had || got > had+n/10 {
			t.Errorf("%d members: b leaving moved %d, b had %d", n, got, had)
		}
		// A new registration moves at most a few others.
		more := Assign(append(regs, Registration{Member: "new"}), []string{"a", "b", "c"})
		if got, _ := moved(three, more); got > 3 {
			t.Errorf("%d members: one more registration moved %d others", n, got)
		}
	}
}

func TestAssignFollowsALivePin(t *testing.T) {
	regs := registrations(30)
	regs[0].Pin, regs[1].Pin = "c", "gone"
	owners := Assign(regs, []string{"a", "b", "c"})
	if owners[regs[0].Member] != "c" {
		t.Errorf("a member pinned to live c is served by %s", owners[regs[0].Member])
	}
	if owners[regs[1].Member] == "" {
		t.Error("a member pinned to a replica that is not live is served by none")
	}
	if got := Assign(regs, nil); len(got) != 0 {
		t.Errorf("with no live replica, %d members are assigned", len(got))
	}
}

func TestFenceNameIsAValidLeaseName(t *testing.T) {
	long := ""
	for len(long) < 253 {
		long += "abcdefghij"
	}
	long = long[:253]
	for _, m := range []string{"m", long, long[:236], long[:237]} {
		if name := FenceName(m); len(name) > 253 {
			t.Errorf("FenceName of a %d-character member is %d characters long", len(m), len(name))
		}
	}
	if FenceName(long) == FenceName(long[:252]+"x") {
		t.Error("two long member names share a fence")
	}
}
