package redisstore

import (
	"context"
	"maps"
	"math/bits"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
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
//
// Routing. The store also sends each script call to the master its slot
// map names, over that node's connection, rather than through the Cluster
// client's own map. The client (rueidis) follows a MOVED reply to the node
// it names, but takes that node as the slot's master only when it had no
// connection to it, never after a failover, whose new master was a
// replica it knew: every call to the failed-over master's slots then costs
// a MOVED round trip first, until the client reads the slots again after a
// random delay of up to a second (for fewer than 100 nodes). Here the
// first MOVED makes the store read the map again, at once, from the node
// that redirected (it knows the new master: it named it), and the command,
// which did not run, is sent where the redirect points. In the chaos soak's
// CLUSTER FAILOVER the MOVED replies fell from about 1,800 in 0.9 s, while
// the p99 latency was 2 to 3 times the second before's, to 96 in 0.2 s
// (docs/failure-modes.md).

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
	nodes   []rueidis.Client     // the masters' clients; nil for one the client does not know
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

// addr returns the address of the master of slot; "" when the map names
// none. A nil map names none.
func (m *slotMap) addr(slot uint16) string {
	if m == nil {
		return ""
	}
	if i := m.of[slot]; i > 0 {
		return m.addrs[i-1]
	}
	return ""
}

// node returns the client of the master of slot; nil when the map names
// none or the client does not know it. A nil map names none.
func (m *slotMap) node(slot uint16) rueidis.Client {
	if m == nil {
		return nil
	}
	if i := m.of[slot]; i > 0 {
		return m.nodes[i-1]
	}
	return nil
}

// slotReader polls CLUSTER SLOTS. Its zero value, and a nil one, know no
// slots.
type slotReader struct {
	client rueidis.Client
	cur    atomic.Pointer[slotMap]
	poller *poller
	// learning serializes the reads a MOVED or READONLY reply asks for, so that the
	// calls redirected together read the map once.
	learning sync.Mutex
}

// maxRedirects bounds the MOVED (or READONLY) replies one call follows.
const maxRedirects = 3

// do sends the command build makes to the master the slot map names for
// its slot, over that node's connection, and returns the reply. A MOVED
// reply means the command did not run: the map is read again from the node
// that redirected (learn) and the command, made again, is sent to the node
// the reply names. A READONLY reply, from a master that a failover made a
// replica, to a call that declares no keys (a batch of several slots,
// batch.go: a keyed call gets MOVED), is taken the same way when the map
// read again names another master: a function that may write is refused
// by a replica before it runs. A slot no master is known to serve, a master the client
// does not know, and an ASK reply (a slot being migrated) go through the
// Cluster client, which finds the node, and follows ASK, itself. Any
// other error is returned as it is, and one that is not a reply (a
// connection lost or refused: the master may be gone) has the map read
// again soon.
func (r *slotReader) do(ctx context.Context, build func() rueidis.Completed) (rueidis.RedisMessage, error) {
	seen := r.load()
	cmd := build()
	slot := cmd.Slot() // read before the call: a command is recycled once answered
	// at is node's address.
	node, at := seen.node(slot), seen.addr(slot)
	if node == nil {
		return r.client.Do(ctx, cmd).ToMessage()
	}
	for redirects := 0; ; redirects++ {
		msg, err := node.Do(ctx, cmd).ToMessage()
		rerr, isReply := rueidis.IsRedisErr(err)
		switch {
		case err == nil:
			return msg, nil
		case !isReply:
			if ctx.Err() == nil {
				r.refresh()
			}
			return msg, err
		}
		if _, ask := rerr.IsAsk(); ask {
			return r.client.Do(ctx, build()).ToMessage()
		}
		addr, moved := rerr.IsMoved()
		if !moved && !isReadOnly(rerr) || redirects == maxRedirects {
			return msg, err
		}
		r.learn(ctx, seen, node)
		seen = r.load()
		next := seen.addr(slot)
		switch {
		case moved:
			next = addr // the map read may not be the redirect's (yet)
		case next == at:
			return msg, err // READONLY, and the map still names the node that refused
		}
		if node, at = seen.node(slot), next; node == nil || next != seen.addr(slot) {
			node = r.client.Nodes()[next]
		}
		cmd = build()
		if node == nil {
			return r.client.Do(ctx, cmd).ToMessage()
		}
	}
}

// isReadOnly reports whether rerr is a replica's refusal of a write.
func isReadOnly(rerr *rueidis.RedisError) bool {
	return strings.HasPrefix(rerr.Error(), "READONLY")
}

// learn reads the slot map again from node, a Cluster node that just
// redirected a call sent by the map seen, unless the map has been read
// again since: of the calls redirected together, one reads it, and the
// others wait for that read. A failed read leaves the map as it was.
func (r *slotReader) learn(ctx context.Context, seen *slotMap, node rueidis.Client) {
	r.learning.Lock()
	defer r.learning.Unlock()
	if r.cur.Load() != seen {
		return
	}
	r.readFrom(ctx, node)
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

// poll reads CLUSTER SLOTS from any node; a node that does not answer
// leaves the map as it was.
func (r *slotReader) poll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.readFrom(ctx, r.client)
}

// readFrom reads CLUSTER SLOTS from c (a node's client, or the Cluster
// client, which asks any node) and keeps the map with the client of each
// master; a node that does not answer, or a reply the store cannot read,
// leaves the map as it was.
func (r *slotReader) readFrom(ctx context.Context, c rueidis.Client) {
	ranges, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return
	}
	if m := parseSlots(ranges); m != nil {
		nodes := r.client.Nodes()
		m.nodes = make([]rueidis.Client, len(m.addrs))
		for i, addr := range m.addrs {
			m.nodes[i] = nodes[addr]
		}
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
