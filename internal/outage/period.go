package outage

import "slices"

// period is what failed since the last line.
type period struct {
	count       int64
	open        int64 // answered by the open circuit
	names       [numKinds]names
	first, last error // from the store
}

func (p *period) reset() {
	p.count, p.open, p.first, p.last = 0, 0, nil, nil
	for i := range p.names {
		p.names[i].reset()
	}
}

// names is a short list of distinct names.
type names struct {
	list []string
	more bool // names were left out
}

func (n *names) add(s string) {
	switch {
	case slices.Contains(n.list, s):
	case len(n.list) == maxNames:
		n.more = true
	default:
		n.list = append(n.list, s)
	}
}

// value returns a copy of the list, ending in "…" when names were left out.
func (n *names) value() []string {
	v := slices.Clone(n.list)
	if n.more {
		v = append(v, "…")
	}
	return v
}

func (n *names) reset() { n.list, n.more = n.list[:0], false }
