package redisstore

import "testing"

// TestClusterSlotVectors checks clusterSlot against the Cluster
// specification's CRC16 check value and slots CLUSTER KEYSLOT gives.
func TestClusterSlotVectors(t *testing.T) {
	for tag, want := range map[string]uint16{"123456789": 0x31C3 % 16384, "foo": 12182, "bar": 5061, "hello": 866, "": 0} {
		if got := clusterSlot([]byte(tag)); got != want {
			t.Errorf("slot of %q = %d, want %d", tag, got, want)
		}
	}
}
