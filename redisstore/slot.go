package redisstore

import "strings"

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// clusterSlot returns the Redis Cluster hash slot of a key whose hash tag
// is tag: CRC16 (XMODEM) of the tag, modulo 16384, as the Cluster
// specification defines it. The clients compute it too but do not export
// it; TestClusterSlot checks it against CLUSTER KEYSLOT.
func clusterSlot[T string | []byte](tag T) uint16 {
	var crc uint16
	for i := range len(tag) {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^tag[i]]
	}
	return crc % clusterSlots
}

// keySlot returns the Redis Cluster hash slot of key: its hash tag's (the
// first "{...}" with something between the braces), or the whole key's.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return clusterSlot(key[i+1 : i+1+j])
		}
	}
	return clusterSlot(key)
}

// crcTable is CRC16-XMODEM's (polynomial 0x1021) table of byte steps.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
