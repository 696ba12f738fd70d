package memstore

// expiring is an item in an expiry heap, at the expiry it had when pushed.
type expiring[T any] struct {
	item T
	at   int64
}

// expiryHeap is a min-heap of items by expiry (container/heap): the
// schedules' queues, the leases' records.
type expiryHeap[T any] []expiring[T]

func (h expiryHeap[T]) Len() int           { return len(h) }
func (h expiryHeap[T]) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap[T]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap[T]) Push(x any)        { *h = append(*h, x.(expiring[T])) }
func (h *expiryHeap[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = expiring[T]{}
	*h = old[:len(old)-1]
	return e
}
