package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
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

// replicaAcks keeps, for each master, how many replicas a script call
// waits for: the one master of a standalone or Sentinel store, or each
// master of a Cluster, which it reads from the store's slots. Over a
// Cluster a call goes to the master the store's slots name for its slot,
// over that node's own client, so that it waits for that master's replicas
// and no other's; a call the node redirects (MOVED or ASK: the slots moved)
// is refused, and the store reads the slots again at once.
type replicaAcks struct {
	client  rueidis.Client
	grace   time.Duration                          // Config.ReplicaGrace
	slots   *slotReader                            // over a Cluster: the master of each slot; else nil
	masters atomic.Pointer[map[string]*masterAcks] // by node ID; "": the one master
	poller  *poller
}

// masterAcks is one master's count, as replicaAcks's comment says.
type masterAcks struct {
	client rueidis.Client // the master's: a Cluster node's, or the store's
	grace  time.Duration
	want   atomic.Int64 // replicas a call waits for
	online atomic.Int64 // replicas online at the last poll
	// The polling goroutine's alone: the master's replication ID, and since when a
	// replica has been missing (zero: none is).
	replid  string
	missing time.Time
}

// newReplicaAcks reads the replicas of the masters once, so that the first
// calls wait for them, and polls them until close; slots is nil unless the
// store is over a Cluster.
func newReplicaAcks(client rueidis.Client, slots *slotReader, grace time.Duration) (*replicaAcks, error) {
	a := &replicaAcks{client: client, slots: slots, grace: grace}
	a.masters.Store(&map[string]*masterAcks{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.poll(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: reading the masters' replicas (WaitForReplicas): %w", err)
	}
	a.poller = startPoller(replicaPoll, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = a.poll(ctx) // a master that does not answer keeps its count
	})
	return a, nil
}

func (a *replicaAcks) close() { a.poller.close() }

// poller calls poll every period, and when kicked, on a goroutine of its
// own, until close.
type poller struct{ stop, done, now chan struct{} }

func startPoller(period time.Duration, poll func()) *poller {
	p := &poller{stop: make(chan struct{}), done: make(chan struct{}), now: make(chan struct{}, 1)}
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
			case <-p.now:
				poll()
			}
		}
	}()
	return p
}

// kick asks for a poll now, unless one is asked for already.
func (p *poller) kick() {
	select {
	case p.now <- struct{}{}:
	default:
	}
}

func (p *poller) close() {
	close(p.stop)
	<-p.done
}

// poll reads each master's replication ID and replicas online, and counts
// them as replicaAcks's comment says. Over a Cluster the masters are the
// slots' as last read; a master that leaves is forgotten, and one that
// comes is counted from its first poll. It fails when no master answered.
func (a *replicaAcks) poll(ctx context.Context) error {
	old := *a.masters.Load()
	masters := map[string]*masterAcks{}
	nodes := map[string]string{} // by ID, the address; "": the store's client
	sm := a.slots.load()
	switch {
	case a.slots == nil:
		nodes[""] = ""
	case sm != nil:
		for i, id := range sm.masters {
			nodes[id] = sm.addrs[i]
		}
	}
	var firstErr error
	answered := 0
	for id, addr := range nodes {
		m := old[id]
		if m == nil {
			m = &masterAcks{client: a.client, grace: a.grace}
			if addr != "" {
				if m.client = a.client.Nodes()[addr]; m.client == nil {
					a.introduce(ctx, sm, id)
				}
				if m.client = a.client.Nodes()[addr]; m.client == nil {
					continue // counted from a poll once the client knows it
				}
			}
		}
		if err := m.poll(ctx); err != nil {
			firstErr = cmp.Or(firstErr, fmt.Errorf("%s: %w", cmp.Or(addr, "master"), err))
			if old[id] != nil {
				masters[id] = m // keeps its count
			}
			continue
		}
		masters[id] = m
		answered++
	}
	a.masters.Store(&masters)
	if answered == 0 {
		return cmp.Or(firstErr, errors.New("no master is known (CLUSTER SLOTS)"))
	}
	return nil
}

// introduce makes the store's Cluster client meet the master id, a
// replica promoted since the client last read the Cluster's slots: the
// client learns of it from the MOVED reply of its old master to a read of a
// key of one of its slots (the store's own calls with WaitForReplicas go to
// the nodes' clients, which never see a MOVED the Cluster client follows).
func (a *replicaAcks) introduce(ctx context.Context, sm *slotMap, id string) {
	var room [16]byte
	for n := range 1 << 16 {
		key := strconv.AppendInt(append(room[:0], '{'), int64(n), 10)
		key = append(key, '}')
		if i := sm.of[clusterSlot(key[1:len(key)-1])]; i > 0 && sm.masters[i-1] == id {
			a.client.Do(ctx, a.client.B().Exists().Key(string(key)).Build())
			return
		}
	}
}

// poll reads the master's replication state.
func (m *masterAcks) poll(ctx context.Context) error {
	info, err := m.client.Do(ctx, m.client.B().Info().Section("replication").Build()).ToString()
	if err != nil {
		return err
	}
	replid, online := parseReplication(info)
	m.observe(replid, online, time.Now())
	return nil
}

// observe counts online replicas under the master's replication ID replid
// at now, as replicaAcks's comment says.
func (m *masterAcks) observe(replid string, online int64, now time.Time) {
	m.online.Store(online)
	switch {
	case replid != m.replid || online >= m.want.Load():
		m.replid, m.missing = replid, time.Time{}
		m.want.Store(online)
	case m.grace <= 0:
	case m.missing.IsZero():
		m.missing = now
	case now.Sub(m.missing) >= m.grace:
		m.missing = time.Time{}
		m.want.Store(online)
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

// master returns the count of the master that serves slot, with the
// client that reaches it; nil when it is not known.
func (a *replicaAcks) master(slot uint16) *masterAcks {
	masters := *a.masters.Load()
	if a.slots == nil {
		return masters[""]
	}
	if m := a.slots.load(); m != nil {
		if i := m.of[slot]; i > 0 {
			return masters[m.masters[i-1]]
		}
	}
	return nil
}

// do sends the command build makes to its master followed by WAIT for the
// master's replicas, on one connection, and returns the command's reply;
// ErrNotReplicated when fewer replicas acknowledged than the call waits
// for, or the master is not known or redirected the call. WAIT waits half
// of what is left of ctx.
func (a *replicaAcks) do(ctx context.Context, build func() rueidis.Completed) (rueidis.RedisMessage, error) {
	seen := a.slots.load()
	cmd := build()
	m := a.master(cmd.Slot())
	if m == nil {
		a.slots.refresh()
		a.poller.kick()
		return rueidis.RedisMessage{}, fmt.Errorf("%w: the replicas of the master of slot %d are not known yet (a failover or a resharding?); the store reads the Cluster's slots again",
			ErrNotReplicated, cmd.Slot())
	}
	want := m.want.Load()
	if want == 0 {
		msg, err := m.client.Do(ctx, cmd).ToMessage()
		return a.redirected(ctx, seen, m, msg, err)
	}
	if online := m.online.Load(); online < want {
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
	rs := m.client.DoMulti(ctx, cmd, m.client.B().Wait().Numreplicas(want).Timeout(wait.Milliseconds()).Build())
	msg, err := rs[0].ToMessage()
	if msg, err = a.redirected(ctx, seen, m, msg, err); err != nil {
		return msg, err
	}
	got, err := rs[1].AsInt64()
	if err != nil { // such as a master turned replica, which unblocks WAIT
		return msg, fmt.Errorf("%w: WAIT for %d replicas: %v", ErrNotReplicated, want, err)
	}
	if got < want {
		return msg, fmt.Errorf("%w: %d of %d acknowledged within %v; the master may be being failed over, or a replica is down or behind (docs/failure-modes.md)",
			ErrNotReplicated, got, want, wait)
	}
	return msg, nil
}

// redirected returns a MOVED or ASK reply, from a Cluster node that does
// not serve the call's slot (any more, or for now), as ErrNotReplicated,
// and on MOVED reads the slots again from m, the node that redirected,
// before it returns (seen is the slot map the call was sent by); other
// replies as they are.
func (a *replicaAcks) redirected(ctx context.Context, seen *slotMap, m *masterAcks, msg rueidis.RedisMessage, err error) (rueidis.RedisMessage, error) {
	if rerr, ok := rueidis.IsRedisErr(err); ok && a.slots != nil {
		if _, moved := rerr.IsMoved(); moved {
			a.slots.learn(ctx, seen, m.client)
			a.poller.kick() // the new master's replicas
			return msg, fmt.Errorf("%w: %v; the store has read the Cluster's slots again", ErrNotReplicated, err)
		}
		if _, ask := rerr.IsAsk(); ask {
			return msg, fmt.Errorf("%w: %v (the slot is being migrated)", ErrNotReplicated, err)
		}
	}
	return msg, err
}
