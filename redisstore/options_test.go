package redisstore_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want redisstore.Config
		tls  bool
	}{
		{"redis://127.0.0.1:7000", redisstore.Config{Addrs: []string{"127.0.0.1:7000"}}, false},
		{"redis://u:p%40ss@h:7000/3", redisstore.Config{Addrs: []string{"h:7000"}, Username: "u", Password: "p@ss", DB: 3}, false},
		{"redis://:secret@h", redisstore.Config{Addrs: []string{"h:6379"}, Password: "secret"}, false},
		{"rediss://h:7000?addr=h2:7001&addr=h3:7002&mode=cluster",
			redisstore.Config{Addrs: []string{"h:7000", "h2:7001", "h3:7002"}, Mode: redisstore.Cluster}, true},
		{"redis://s1:26379?addr=s2:26379&master=main",
			redisstore.Config{Addrs: []string{"s1:26379", "s2:26379"}, Mode: redisstore.Sentinel, MasterName: "main"}, false},
		{"redis://s1:26379?master_set=main&mode=sentinel",
			redisstore.Config{Addrs: []string{"s1:26379"}, Mode: redisstore.Sentinel, MasterName: "main"}, false},
		{"redis://s1:26379?master=main&wait_for_replicas=true",
			redisstore.Config{Addrs: []string{"s1:26379"}, Mode: redisstore.Sentinel, MasterName: "main", WaitForReplicas: true}, false},
		{"redis://s1:26379?master=main&wait_for_replicas=true&replica_grace=30s",
			redisstore.Config{Addrs: []string{"s1:26379"}, Mode: redisstore.Sentinel, MasterName: "main", WaitForReplicas: true, ReplicaGrace: 30 * time.Second}, false},
	} {
		got, err := redisstore.ParseURL(tc.url)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.url, err)
			continue
		}
		if (got.TLS != nil) != tc.tls {
			t.Errorf("ParseURL(%q): TLS %v, want %v", tc.url, got.TLS != nil, tc.tls)
		}
		got.TLS = nil
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q) =\n %+v\nwant %+v", tc.url, got, tc.want)
		}
	}
	for _, bad := range []string{"http://h", "redis://h/x", "redis://h?mode=ring", "::", "redis://h?wait_for_replicas=maybe", "redis://h?wait_for_replicas=true&replica_grace=soon", "redis://h?replica_grace=-1s"} {
		if _, err := redisstore.ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q): no error", bad)
		}
	}
}

func TestClientOption(t *testing.T) {
	opt, err := redisstore.ClientOption(redisstore.Config{Mode: redisstore.Sentinel, Addrs: []string{"s:1"}, MasterName: "m", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	if opt.Sentinel.MasterSet != "m" || opt.Sentinel.Password != "pw" || opt.Password != "pw" {
		t.Errorf("sentinel options %+v", opt.Sentinel)
	}
	// A missed +switch-master must not bind the client to the old master.
	if opt.Sentinel.TopologyRefreshInterval <= 0 {
		t.Errorf("sentinel options: TopologyRefreshInterval %v, want the master asked for periodically", opt.Sentinel.TopologyRefreshInterval)
	}
	if _, err := redisstore.ClientOption(redisstore.Config{Mode: redisstore.Sentinel}); err == nil {
		t.Error("Sentinel without MasterName: no error")
	}
	if _, err := redisstore.ClientOption(redisstore.Config{Mode: redisstore.Cluster, DB: 1}); err == nil {
		t.Error("Cluster with DB 1: no error")
	}
	// Fields set in the Config override the URL's.
	opt, err = redisstore.ClientOption(redisstore.Config{URL: "redis://u:p@h:1/2", Password: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if opt.Password != "other" || opt.Username != "u" || opt.SelectDB != 2 || opt.InitAddress[0] != "h:1" {
		t.Errorf("URL with an override: %+v", opt)
	}
}

// TestClusterURL opens the Cluster store from a URL naming two seeds and
// decides a cross-slot policy.
func TestClusterURL(t *testing.T) {
	c := sharedCluster(t)
	a := c.Addrs()
	s, err := redisstore.New(redisstore.Config{URL: "redis://" + a[0] + "?addr=" + a[1] + "&mode=cluster", Prefix: newPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &sluice.Policy{Name: "u", Rules: []sluice.Rule{
		{Name: "global", Limit: 2, Window: time.Minute},
		{Name: "user", Limit: 1, Window: time.Minute, By: []string{"user"}},
	}}
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: 5 * time.Second})
	ctx := context.Background()
	var got []bool
	for _, u := range []string{"a", "a", "b", "c"} {
		d, err := lim.Allow(ctx, p, map[string]string{"user": u})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Allowed)
	}
	if want := []bool{true, false, true, false}; !reflect.DeepEqual(got, want) {
		t.Errorf("allowed %v, want %v", got, want)
	}
}

// WaitForReplicas needs a rueidis client.
func TestWaitForReplicasRefused(t *testing.T) {
	type evaler struct{ redisstore.Evaler } // never called
	_, err := redisstore.NewFromEvaler(evaler{}, redisstore.Config{WaitForReplicas: true})
	if err == nil || !strings.Contains(err.Error(), "rueidis") {
		t.Errorf("NewFromEvaler with WaitForReplicas: %v, want an error naming rueidis", err)
	}
}
