package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Batching. Decisions bound for one Redis server are queued while earlier
// calls are in flight and sent together, as one decide.lua call, when a call
// returns: under light load each decision goes out at once, alone; under
// heavy load the batches grow with the load, and the server runs one script
// per batch instead of one per decision. Each decision in a batch is still
// decided atomically and exactly (decide.lua runs them one after the
// other), a failed batch fails each of its decisions, and nothing is ever
// sent twice.
//
// A client talking to one server has one batcher. A Cluster client has one
// per master (masterBatchers): a decision's keys lie in one slot (keys.go),
// and a batch of decisions of several slots of one master goes out with
// its keys among the arguments (no declared keys, so no CROSSSLOT refusal),
// routed to the master of its first decision's slot; a script may touch
// keys of several slots of its node. A decision whose slot the node no
// longer serves (a failover or a resharding since the store read the
// slots) fails there before it writes anything, and is sent again alone,
// with its keys declared, which the client follows to the slot's new
// master. A batch of one slot declares its keys as any call does.

const (
	// maxInflight is how many batches may wait for their reply at once.
	// rueidis pipelines them on one connection, so the server always has
	// the next batch to run while a reply travels back.
	maxInflight = 2

	// maxBatch bounds the requests in one batch, so that one script call
	// never holds the server for long (and a request's shape number fits
	// in a byte).
	maxBatch = 255

	// maxShapes bounds the distinct argument lists a batch looks through
	// for a request's own.
	maxShapes = 8
)

// batchCall is one decision waiting in a batcher.
type batchCall struct {
	ctx   context.Context
	keys  []string
	shape string        // shapeOf's
	done  chan struct{} // receives once reply or err is set
	reply []int64
	err   error
	sent  bool // in a batch that was sent; guarded by the batcher's mu
	left  bool // its caller stopped waiting before it was sent
}

// calls recycles the batchCalls whose callers got their reply.
var calls = sync.Pool{New: func() any { return &batchCall{done: make(chan struct{}, 1)} }}

// finish returns the call's result and recycles it.
func (c *batchCall) finish() ([]int64, error) {
	reply, err := c.reply, c.err
	*c = batchCall{done: c.done}
	calls.Put(c)
	return reply, err
}

// batcher sends decide.lua calls over a rueidis client, batching the calls
// that arrive while others are in flight.
type batcher struct {
	ev       rueidisEvaler
	slots    bool // a Cluster master's: its batches may span slots
	mu       sync.Mutex
	inflight int
	queue    []*batchCall
}

var (
	_ decider = (*batcher)(nil)
	_ decider = (*masterBatchers)(nil)
)

func newBatcher(ev rueidisEvaler) *batcher {
	return &batcher{ev: ev}
}

// masterBatchers are a Cluster client's batchers, one per master that a
// decision went to (by the store's slot map; one per slot while the map is
// not read yet).
type masterBatchers struct {
	ev    rueidisEvaler
	slots *slotReader
	m     sync.Map // master's ID (string), or hash slot (uint16) -> *batcher
}

// decide runs decide.lua with the batcher of the keys' master.
func (s *masterBatchers) decide(ctx context.Context, keys []string, shape string) ([]int64, error) {
	if len(keys) == 0 {
		return nil, errors.New("decide.lua needs at least one key")
	}
	slot := keySlot(keys[0])
	var group any = slot
	if m := s.slots.load(); m != nil {
		if i := m.of[slot]; i > 0 {
			group = m.masters[i-1]
		}
	}
	b, ok := s.m.Load(group)
	if !ok {
		b, _ = s.m.LoadOrStore(group, &batcher{ev: s.ev, slots: true})
	}
	return b.(*batcher).decide(ctx, keys, shape)
}

// decide runs decide.lua for a decision of keys and shape, alone or in a
// batch, and returns its reply. Its errors are the client's or the
// server's, never ErrNoScript (a batcher loads its scripts itself).
func (b *batcher) decide(ctx context.Context, keys []string, shape string) ([]int64, error) {
	c := calls.Get().(*batchCall)
	c.ctx, c.keys, c.shape = ctx, keys, shape
	b.mu.Lock()
	if b.inflight < maxInflight {
		b.inflight++
		c.sent = true
		b.mu.Unlock()
		go b.send([]*batchCall{c})
	} else {
		b.queue = append(b.queue, c)
		b.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.finish()
	case <-ctx.Done():
	}
	select {
	case <-c.done: // the reply came as the context ended
		return c.finish()
	default:
	}
	// The call is dropped, not recycled: the batcher may still hold it.
	b.mu.Lock()
	if !c.sent {
		c.left = true
	}
	b.mu.Unlock()
	// Sent or not, the caller gets the context's error, as it would from a
	// call of its own: a sent request may have been recorded.
	return nil, ctx.Err()
}

// send runs one batch, delivers its replies, then sends the calls that
// queued meanwhile, if any. It runs in a goroutine of its own, so that no
// caller waits longer than its context allows.
func (b *batcher) send(calls []*batchCall) {
	b.run(calls)
	b.mu.Lock()
	next := b.take()
	if next == nil {
		b.inflight--
	}
	b.mu.Unlock()
	if next != nil {
		go b.send(next)
	}
}

// take removes and returns up to maxBatch queued calls whose callers still
// wait, marked sent; nil when none do. The caller holds mu.
func (b *batcher) take() []*batchCall {
	var out []*batchCall
	n := 0
	for n < len(b.queue) && len(out) < maxBatch {
		c := b.queue[n]
		n++
		if c.left {
			continue
		}
		c.sent = true
		out = append(out, c)
	}
	clear(b.queue[:n])
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = nil
	}
	return out
}

// run sends calls as one script call, sets each call's reply or error and
// signals its caller.
func (b *batcher) run(calls []*batchCall) {
	b.exec(calls)
	for _, c := range calls {
		c.done <- struct{}{}
	}
}

// exec sends calls as one script call and sets each call's reply or error.
func (b *batcher) exec(calls []*batchCall) {
	// The batch waits as long as its most patient caller: a server that
	// stops answering releases the batch's place when every caller has
	// given up on it.
	ctx, cancel := batchContext(calls)
	defer cancel()
	if len(calls) == 1 {
		c := calls[0]
		c.reply, c.err = ints(b.ev.decideMessage(ctx, decideScripts.forShape(c.shape), c.keys, singleArgs(c.shape), ""))
		return
	}
	// Requests with equal shapes (one policy, cost and mode) share one; a
	// few shapes are looked for, then every new request gets one.
	args := make([]string, 1, 3)
	sc := decideScripts.log
	index := make([]byte, len(calls))
	nkeys := 0
	for i, c := range calls {
		nkeys += len(c.keys)
		j := slices.Index(args[1:min(len(args), 1+maxShapes)], c.shape)
		if j < 0 {
			j = len(args) - 1
			args = append(args, c.shape)
			if !shapeIsLog(c.shape) {
				sc = decideScripts.all
			}
		}
		index[i] = byte(j + 1)
	}
	shapes := len(args) - 1
	args[0] = batchHead(len(calls), shapes)
	if shapes > 1 {
		args = append(args, string(index))
	}
	var keys []string
	var route string // a key of the slot to send a batch of several slots to
	if b.slots && spansSlots(calls) {
		route = calls[0].keys[0]
		args = slices.Grow(args, nkeys)
		for _, c := range calls {
			args = append(args, c.keys...)
		}
	} else {
		keys = make([]string, 0, nkeys)
		for _, c := range calls {
			keys = append(keys, c.keys...)
		}
	}
	reply, err := array(b.ev.decideMessage(ctx, sc, keys, args, route))
	if err == nil {
		err = splitBatchReply(reply, calls)
	}
	if err == nil && route != "" {
		b.resendMoved(ctx, calls)
	}
	if err != nil {
		err = fmt.Errorf("in a batch of %d requests: %w", len(calls), err)
		for _, c := range calls {
			c.reply, c.err = nil, err
		}
	}
}

// spansSlots reports whether calls' keys lie in more than one slot.
func spansSlots(calls []*batchCall) bool {
	first := keySlot(calls[0].keys[0])
	for _, c := range calls[1:] {
		if keySlot(c.keys[0]) != first {
			return true
		}
	}
	return false
}

// errNotLocal is the error of a script that touched a key of a slot its
// node does not serve: raised by the first command on the key, before the
// decision wrote anything.
const errNotLocal = "Script attempted to access a non local key in a cluster node"

// resendMoved sends again, alone and with its keys declared, each call of
// a batch of several slots that failed because its node no longer serves
// its slot: the decision did not run there.
func (b *batcher) resendMoved(ctx context.Context, calls []*batchCall) {
	for _, c := range calls {
		if c.err != nil && strings.Contains(c.err.Error(), errNotLocal) {
			c.reply, c.err = ints(b.ev.decideMessage(ctx, decideScripts.forShape(c.shape), c.keys, singleArgs(c.shape), ""))
		}
	}
}

// splitBatchReply sets each call's reply or error from decide.lua's flat
// reply for a batch: per request, its integers (replyWidth of its shape),
// or -1 and an error message.
func splitBatchReply(reply []rueidis.RedisMessage, calls []*batchCall) error {
	at := 0
	for i, c := range calls {
		if at >= len(reply) {
			return fmt.Errorf("decide.lua replied for %d of %d requests", i, len(calls))
		}
		if first, err := reply[at].AsInt64(); err == nil && first == -1 {
			if at+1 >= len(reply) {
				return fmt.Errorf("decide.lua's error for request %d has no message", i+1)
			}
			msg, err := reply[at+1].ToString()
			if err != nil {
				return fmt.Errorf("decide.lua's error for request %d is not a string: %w", i+1, err)
			}
			c.err = errors.New(msg)
			at += 2
			continue
		}
		k := replyWidth(c.shape)
		if at+k > len(reply) {
			return fmt.Errorf("decide.lua's reply for request %d has %d of its %d integers", i+1, len(reply)-at, k)
		}
		c.reply = make([]int64, k)
		for j := range c.reply {
			var err error
			if c.reply[j], err = reply[at+j].AsInt64(); err != nil {
				return fmt.Errorf("decide.lua's reply for request %d: element %d is not an integer: %w", i+1, j, err)
			}
		}
		at += k
	}
	if at != len(reply) {
		return fmt.Errorf("decide.lua replied %d elements, %d more than its %d requests'", len(reply), len(reply)-at, len(calls))
	}
	return nil
}

// batchContext returns a context that ends at the latest deadline of the
// calls' contexts, and never when one of them has none.
func batchContext(calls []*batchCall) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}
