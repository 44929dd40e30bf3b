package sharding

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func registrations(n int) []Registration {
	regs := make([]Registration, n)
	for i := range regs {
		regs[i] = Registration{Member: fmt.Sprintf("member-%04d", i)}
	}
	return regs
}

// owners is Assign's map, pins followed within the fair share.
func owners(regs []Registration, live []string) map[string]string {
	o, _ := Assign(regs, live, false)
	return o
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
		owners := owners(registrations(tc.members), live)
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
		three := owners(regs, []string{"a", "b", "c"})
		four := owners(regs, []string{"a", "b", "c", "d"})
		got, to := moved(three, four)
		// A quarter must move to d; allow a tenth of the members more.
		if need := n / 4; got < need || got > need+n/10 || to["d"] < need {
			t.Errorf("%d members: a 4th replica moved %d (%v), want about %d, all to d", n, got, to, need)
		}
		if got := owners(regs, []string{"d", "c", "b", "a"}); !maps.Equal(got, four) {
			t.Errorf("%d members: the owners depend on the order of the live replicas", n)
		}
		two := owners(regs, []string{"a", "c"})
		got, _ = moved(three, two)
		if had := loads(three)["b"]; got < had || got > had+n/10 {
			t.Errorf("%d members: b leaving moved %d, b had %d", n, got, had)
		}
		// A new registration moves at most a few others.
		more := owners(append(regs, Registration{Member: "new"}), []string{"a", "b", "c"})
		if got, _ := moved(three, more); got > 3 {
			t.Errorf("%d members: one more registration moved %d others", n, got)
		}
	}
}

func TestAssignFollowsALivePin(t *testing.T) {
	regs := registrations(30)
	regs[0].Pin, regs[1].Pin = "c", "gone"
	got, unpinned := Assign(regs, []string{"a", "b", "c"}, false)
	if got[regs[0].Member] != "c" {
		t.Errorf("a member pinned to live c is served by %s", got[regs[0].Member])
	}
	if got[regs[1].Member] == "" {
		t.Error("a member pinned to a replica that is not live is served by none")
	}
	want := map[string]Unpinned{regs[1].Member: {Reason: PinReplicaNotLive}}
	if !maps.Equal(unpinned, want) {
		t.Errorf("pins not followed: %v, want %v", unpinned, want)
	}
	if got, _ := Assign(regs, nil, false); len(got) != 0 {
		t.Errorf("with no live replica, %d members are assigned", len(got))
	}
}

// Pins cannot pile the fleet onto one replica: a replica takes pinned
// members up to its fair share, the others are shared out like unpinned
// ones and reported, unless the administrator allows pins beyond the share.
func TestAssignFollowsPinsWithinTheFairShare(t *testing.T) {
	live := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name               string
		members, pinnedToA int
		beyond             bool
		// want: a's load, and how many pins are reported.
		wantA, wantUnpinned int
	}{
		{"every member pinned to a", 61, 61, false, 21, 40},
		{"every member pinned to a, exactly divisible", 60, 60, false, 20, 40},
		{"a few pinned to a", 60, 5, false, 20, 0},
		{"as many pinned to a as its share", 60, 20, false, 20, 0},
		{"one more than its share", 60, 21, false, 20, 1},
		{"every member pinned to a, allowed beyond the share", 61, 61, true, 61, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regs := registrations(tc.members)
			for i := range tc.pinnedToA {
				regs[i].Pin = "a"
			}
			got, unpinned := Assign(regs, live, tc.beyond)
			if len(got) != tc.members {
				t.Fatalf("%d of %d members assigned", len(got), tc.members)
			}
			load := loads(got)
			if load["a"] != tc.wantA {
				t.Errorf("a serves %d, want %d (loads %v)", load["a"], tc.wantA, load)
			}
			if !tc.beyond {
				low, high := tc.members/len(live), (tc.members+len(live)-1)/len(live)
				for _, r := range live {
					if load[r] < low || load[r] > high {
						t.Errorf("%s serves %d, want %d to %d", r, load[r], low, high)
					}
				}
			}
			if len(unpinned) != tc.wantUnpinned {
				t.Errorf("%d pins reported as not followed, want %d", len(unpinned), tc.wantUnpinned)
			}
			for m, u := range unpinned {
				if u.Reason != PinBeyondFairShare || got[m] == "a" || u.Share != tc.wantA {
					t.Errorf("%s: reported %+v and served by %s", m, u, got[m])
				}
			}
			for i := range tc.pinnedToA {
				if _, reported := unpinned[regs[i].Member]; !reported && got[regs[i].Member] != "a" {
					t.Errorf("%s pinned to a is served by %s and not reported", regs[i].Member, got[regs[i].Member])
				}
			}
			// The same map whatever the order of the registrations.
			reversed := slices.Clone(regs)
			slices.Reverse(reversed)
			again, _ := Assign(reversed, live, tc.beyond)
			if !maps.Equal(again, got) {
				t.Error("the owners depend on the order of the registrations")
			}
		})
	}
}

// No two legal member names share a fence, the pair today's scheme made
// collide included (a 250-character name and the 236-character name its
// fence was shortened to), and every fence name is a legal Lease name.
func TestFenceNamesAreDistinctLegalLeaseNames(t *testing.T) {
	long := strings.Repeat("abcdefghij", 26)[:253]
	twin := func(member string) string { // what FenceName shortened member to, without its prefix
		sum := sha256.Sum256([]byte(member))
		return member[:253-17-17] + "-" + hex.EncodeToString(sum[:8])
	}
	for _, tc := range []struct {
		name string
		a, b string
	}{
		{"a 250-character name and its 236-character twin", long[:250], twin(long[:250])},
		{"a 253-character name and its twin", long, twin(long)},
		{"the longest short name and the shortest long one", long[:236], long[:237]},
		{"two long names alike but for the last character", long, long[:252] + "x"},
		{"a short name that spells a long name's digest", long, hexOf(long)},
		{"one character", "m", "n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fa, fb := FenceName(tc.a), FenceName(tc.b)
			if fa == fb {
				t.Errorf("%d- and %d-character members share fence %s", len(tc.a), len(tc.b), fa)
			}
			for _, f := range []string{fa, fb} {
				if errs := validation.IsDNS1123Subdomain(f); len(errs) > 0 {
					t.Errorf("fence %s: %v", f, errs)
				}
			}
		})
	}
	if FenceName("m") != "widgethub-member-m" || FenceName(long[:236]) != "widgethub-member-"+long[:236] {
		t.Error("a member name that fits keeps the fence it had: a rolling upgrade hands it over through the same Lease")
	}
}

func hexOf(member string) string {
	sum := sha256.Sum256([]byte(member))
	return hex.EncodeToString(sum[:])
}
