package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/store"
)

// Replica acknowledgements (Config.WaitForReplicas).
//
// Redis replicates asynchronously: a master answers a write before its
// replicas have it. When a replica is promoted without waiting for the
// master, as SENTINEL FAILOVER does, the master keeps answering writes for
// about a second until the clients learn of the promotion, and the
// sentinels then turn it into a replica of the new master, which discards
// them. Each admission discarded so is one the window admits again.
//
// With acknowledgements, every script call is followed on its connection
// by WAIT, and a call whose writes did not reach every replica the master
// has had is an error (ErrNotReplicated), so the Limiter decides it by its
// failure policy: an admission is reported only once it is on the replicas,
// and the replica a failover promotes holds every admission reported.
//
// How many replicas a call waits for is the key: the old master, which
// lost the replica that was promoted, must wait for it in vain, while the
// new master, which has no replica yet, must not wait at all. A Redis
// server takes a new replication ID when it becomes a master, so the store
// counts replicas per replication ID: the most replicas online it has seen
// under the master's current ID, polled every replicaPoll. The old master
// keeps its ID and its count; the new one starts from its own replicas.
// The count never falls under one ID: a replica that leaves for good stops
// admissions, as Redis's min-replicas-to-write does, until it is back or the
// process makes a new store, which counts the replicas it finds; or, with
// Config.ReplicaGrace, until the replica has been missing that long, when
// the count falls to the replicas online.

// replicaPoll is how often the store reads its master's replication state.
const replicaPoll = 200 * time.Millisecond

// ErrNotReplicated reports that a script call's writes did not reach every
// replica of the master in time (Config.WaitForReplicas): the master may be
// in a failover that would discard them, or a replica is down or lagging.
// The call may have been recorded on the master. It matches
// store.ErrRefused: the Limiter's circuit breaker does not count it, so
// that the store is called again the moment the client follows a failover.
var ErrNotReplicated error = notReplicated{}

type notReplicated struct{}

func (notReplicated) Error() string { return "redisstore: the write did not reach every replica" }

func (notReplicated) Is(target error) bool { return target == store.ErrRefused }

// replicaAcks keeps how many replicas a script call waits for.
type replicaAcks struct {
	client rueidis.Client
	grace  time.Duration // Config.ReplicaGrace
	want   atomic.Int64  // replicas a call waits for
	online atomic.Int64  // replicas online at the last poll
	// The polling goroutine's alone: the master's replication ID, and since when a
	// replica has been missing (zero: none is).
	replid  string
	missing time.Time
	poller  *poller
}

// newReplicaAcks reads the master's replicas once, so that the first calls
// wait for them, and polls them until close.
func newReplicaAcks(client rueidis.Client, grace time.Duration) (*replicaAcks, error) {
	a := &replicaAcks{client: client, grace: grace}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.poll(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: reading the master's replicas (WaitForReplicas): %w", err)
	}
	a.poller = startPoller(replicaPoll, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = a.poll(ctx) // a master that does not answer keeps its count
	})
	return a, nil
}

func (a *replicaAcks) close() { a.poller.close() }

// poller calls poll every period, on a goroutine of its own, until close.
type poller struct{ stop, done chan struct{} }

func startPoller(period time.Duration, poll func()) *poller {
	p := &poller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				poll()
			}
		}
	}()
	return p
}

func (p *poller) close() {
	close(p.stop)
	<-p.done
}

// poll reads the master's replication ID and replicas online, and counts
// them as the type's comment says.
func (a *replicaAcks) poll(ctx context.Context) error {
	info, err := a.client.Do(ctx, a.client.B().Info().Section("replication").Build()).ToString()
	if err != nil {
		return err
	}
	replid, online := parseReplication(info)
	a.observe(replid, online, time.Now())
	return nil
}

// observe counts online replicas under the master's replication ID replid
// at now, as the type's comment says.
func (a *replicaAcks) observe(replid string, online int64, now time.Time) {
	a.online.Store(online)
	switch {
	case replid != a.replid || online >= a.want.Load():
		a.replid, a.missing = replid, time.Time{}
		a.want.Store(online)
	case a.grace <= 0:
	case a.missing.IsZero():
		a.missing = now
	case now.Sub(a.missing) >= a.grace:
		a.missing = time.Time{}
		a.want.Store(online)
	}
}

// parseReplication returns the replication ID and the replicas online in
// the reply of INFO replication.
func parseReplication(info string) (replid string, online int64) {
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch {
		case k == "master_replid":
			replid = v
		case strings.HasPrefix(k, "slave") && strings.Contains(v, "state=online"):
			online++
		}
	}
	return replid, online
}

// do sends cmd followed by WAIT for the replicas, on one connection, and
// returns cmd's reply; ErrNotReplicated when fewer replicas acknowledged
// than the call waits for. WAIT waits half of what is left of ctx.
func (a *replicaAcks) do(ctx context.Context, cmd rueidis.Completed, want int64) (rueidis.RedisMessage, error) {
	if online := a.online.Load(); online < want {
		// The last poll found replicas missing: refuse without waiting for
		// them, until a poll finds them back or finds a new master.
		return rueidis.RedisMessage{}, fmt.Errorf("%w: %d of %d online at the master; the master may be being failed over, or a replica is down (docs/failure-modes.md)",
			ErrNotReplicated, online, want)
	}
	wait := time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d)/2, time.Millisecond).Truncate(time.Millisecond)
	}
	// WAIT blocks its connection: rueidis sends the pair over a connection
	// of its own, where WAIT covers cmd's writes.
	rs := a.client.DoMulti(ctx, cmd, a.client.B().Wait().Numreplicas(want).Timeout(wait.Milliseconds()).Build())
	msg, err := rs[0].ToMessage()
	if err != nil {
		return msg, err
	}
	got, err := rs[1].AsInt64()
	if err != nil {
		return msg, fmt.Errorf("redisstore: WAIT for %d replicas: %w", want, err)
	}
	if got < want {
		return msg, fmt.Errorf("%w: %d of %d acknowledged within %v; the master may be being failed over, or a replica is down or behind (docs/failure-modes.md)",
			ErrNotReplicated, got, want, wait)
	}
	return msg, nil
}
