package redistest

import (
	"strings"
	"testing"
)

func TestClusterStartsHealthy(t *testing.T) {
	t.Parallel()
	c := StartCluster(t)
	if got := len(c.Masters()); got != 3 {
		t.Errorf("%d masters, want 3", got)
	}
	m, r, err := c.MasterOf("{x}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Do("SET", "{x}", "1"); err != nil {
		t.Fatalf("SET on the master of {x}: %v", err)
	}
	if _, err := r.Do("SET", "{x}", "1"); err == nil || !strings.Contains(err.Error(), "MOVED") {
		t.Errorf("SET on a replica: %v, want MOVED", err)
	}
}

func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	st := StartSentinel(t)
	old := st.Master()
	if old == nil {
		t.Fatal("no master")
	}
	next, _, err := st.Failover()
	if err != nil {
		t.Fatal(err)
	}
	if next == old {
		t.Fatal("the master did not change")
	}
	if st.Master() != next {
		t.Errorf("Master() = %v after failover, want %s", st.Master(), next.Addr())
	}
}
