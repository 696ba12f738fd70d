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

func TestSentinelTwoReplicasMinReplicas(t *testing.T) {
	t.Parallel()
	st := StartSentinelWith(t, SentinelOptions{Replicas: 2, MinReplicasToWrite: 1, MinReplicasMaxLag: 2})
	old := st.Master()
	if old == nil {
		t.Fatal("no master")
	}
	if got := len(st.Replicas()); got != 2 {
		t.Fatalf("%d replicas, want 2", got)
	}
	for _, s := range st.Data() {
		for setting, want := range map[string]string{"min-replicas-to-write": "1", "min-replicas-max-lag": "2"} {
			if got, err := s.Do("CONFIG", "GET", setting); err != nil || got != setting+"\n"+want {
				t.Errorf("%s CONFIG GET %s = %q, %v; want %s", s.Addr(), setting, got, err, want)
			}
		}
	}
	if _, err := old.Do("SET", "k", "1"); err != nil {
		t.Errorf("SET on a master with two replicas: %v", err)
	}
	next, _, err := st.Failover()
	if err != nil {
		t.Fatal(err)
	}
	if next == old || st.Master() != next {
		t.Errorf("master %s after failover from %s, want one of the replicas", st.Master().Addr(), old.Addr())
	}
}
