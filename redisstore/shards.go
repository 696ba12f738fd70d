package redisstore

import (
	"context"
	"maps"
	"math/bits"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/store"
)

// Shards. Over a Redis Cluster the Store is a store.Sharded: it names the
// masters that keep a request's windows, so that the Limiter keeps a
// circuit breaker per master (per set of masters, for a request whose
// windows span several). With one breaker for the store, one frozen
// master of three opened the circuit for every key: its calls time out
// together and fill the failure count, and 94 – 99% of the decisions for
// the keys of the two that answered were degraded
// (TestClusterBreakerPerMaster, none with a breaker per master).
// The store reads which master serves each slot from CLUSTER SLOTS every
// slotsPoll; a failover's new master is a new shard, with a closed circuit.

// slotsPoll is how often the store reads the Cluster's slots.
const slotsPoll = time.Second

var _ store.Sharded = (*Store)(nil)

// Shard names the masters that keep req's windows by their node IDs: one
// master's ID, or with per-rule slots (SlotsPerRule, a Cluster's default)
// the IDs of several joined by "+", in order; "" when the store is not over a Cluster or has
// not read its slots yet. A request whose windows span masters then has a
// circuit of its own: the notifier's per-category cap on a master that
// fails opens the circuit for its category, not for every category that
// shares the global cap's master.
func (s *Store) Shard(req *store.Request) string {
	m := s.slots.load()
	if m == nil || len(req.Checks) == 0 {
		return ""
	}
	var room [128]byte
	var on uint64 // bit i: masters[i] keeps one of req's windows
	for i := range req.Checks {
		j := m.of[clusterSlot(s.names.appendTag(room[:0], req, &req.Checks[i]))]
		switch {
		case j == 0: // a slot no master is known to serve
			return ""
		case j > 64: // past the mask (over 64 masters): this check's alone
			return m.masters[j-1]
		}
		if on |= 1 << (j - 1); !s.names.perRule {
			break // every check has the first one's tag
		}
	}
	return m.shard(on)
}

// QueueShard names the master that keeps queue q, as Shard does.
func (s *Store) QueueShard(q store.Queue) string {
	m := s.slots.load()
	if m == nil {
		return ""
	}
	var room [128]byte
	return m.master(clusterSlot(appendQueueTag(room[:0], q)))
}

// slotMap is the Cluster's slots as read: the master of each.
type slotMap struct {
	masters []string             // node IDs (host:port when a node has none)
	addrs   []string             // the masters' host:port
	of      [clusterSlots]uint16 // index in masters + 1; 0: no master known
	// The names of the sets of masters named so far, by shard's bits:
	// replaced, never changed, so that a lookup takes no lock.
	sets atomic.Pointer[map[uint64]string]
}

// maxSets bounds the names a slotMap keeps; past it a set's name is made
// for each call.
const maxSets = 1024

// shard names the masters whose bits are on, in the order of their IDs. A
// set of several is named once per slotMap, not once per request.
func (m *slotMap) shard(on uint64) string {
	if on&(on-1) == 0 {
		return m.masters[bits.TrailingZeros64(on)]
	}
	sets := m.sets.Load()
	if sets != nil {
		if name, ok := (*sets)[on]; ok {
			return name
		}
	}
	var room [8]string
	ids := room[:0]
	for bit := on; bit != 0; bit &= bit - 1 {
		ids = append(ids, m.masters[bits.TrailingZeros64(bit)])
	}
	slices.Sort(ids)
	name := strings.Join(ids, "+")
	if sets == nil || len(*sets) < maxSets {
		next := map[uint64]string{on: name}
		if sets != nil {
			maps.Copy(next, *sets)
		}
		m.sets.CompareAndSwap(sets, &next) // a lost race names the set again
	}
	return name
}

func (m *slotMap) master(slot uint16) string {
	if i := m.of[slot]; i > 0 {
		return m.masters[i-1]
	}
	return ""
}

// slotReader polls CLUSTER SLOTS. Its zero value, and a nil one, know no
// slots.
type slotReader struct {
	client rueidis.Client
	cur    atomic.Pointer[slotMap]
	poller *poller
}

// newSlotReader reads the Cluster's slots once, so that the first calls
// have their shards, and polls them until close.
func newSlotReader(client rueidis.Client) *slotReader {
	r := &slotReader{client: client}
	r.poll()
	r.poller = startPoller(slotsPoll, r.poll)
	return r
}

func (r *slotReader) load() *slotMap {
	if r == nil {
		return nil
	}
	return r.cur.Load()
}

// refresh reads the slots again now; a nil reader does nothing.
func (r *slotReader) refresh() {
	if r != nil {
		r.poller.kick()
	}
}

func (r *slotReader) close() {
	if r != nil {
		r.poller.close()
	}
}

// poll reads CLUSTER SLOTS; a node that does not answer leaves the map as
// it was.
func (r *slotReader) poll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ranges, err := r.client.Do(ctx, r.client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return
	}
	if m := parseSlots(ranges); m != nil {
		r.cur.Store(m)
	}
}

// parseSlots reads CLUSTER SLOTS' reply: per range, its first and last
// slot and its master's address and ID (then the replicas'). It returns
// nil for a reply it cannot read.
func parseSlots(ranges []rueidis.RedisMessage) *slotMap {
	m := &slotMap{}
	index := map[string]uint16{}
	for _, rg := range ranges {
		f, err := rg.ToArray()
		if err != nil || len(f) < 3 {
			return nil
		}
		first, err1 := f[0].AsInt64()
		last, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || first < 0 || last >= clusterSlots || first > last {
			return nil
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		name := addr
		if len(node) > 2 {
			if id, err := node[2].ToString(); err == nil && id != "" {
				name = id
			}
		}
		i, ok := index[name]
		if !ok {
			m.masters = append(m.masters, name)
			m.addrs = append(m.addrs, addr)
			i = uint16(len(m.masters))
			index[name] = i
		}
		for slot := first; slot <= last; slot++ {
			m.of[slot] = i
		}
	}
	return m
}
