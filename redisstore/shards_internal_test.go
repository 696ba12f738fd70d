package redisstore

import "testing"

// TestSlotMapShard names sets of masters: one by its ID, several by their
// IDs in order joined by "+", whatever order CLUSTER SLOTS listed them in.
func TestSlotMapShard(t *testing.T) {
	m := &slotMap{masters: []string{"c", "a", "b"}}
	for _, tt := range []struct {
		on   uint64
		want string
	}{
		{0b001, "c"},
		{0b010, "a"},
		{0b011, "a+c"},
		{0b110, "a+b"},
		{0b111, "a+b+c"},
	} {
		if got := m.shard(tt.on); got != tt.want {
			t.Errorf("shard(%03b) = %q; want %q", tt.on, got, tt.want)
		}
	}
	// A set named before is not named again: no allocation per request.
	if allocs := testing.AllocsPerRun(100, func() { m.shard(0b101) }); allocs != 0 {
		t.Errorf("shard of a set named before: %v allocations, want 0", allocs)
	}
}
