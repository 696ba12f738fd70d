package redisstore

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// clusterSlot returns the Redis Cluster hash slot of a key whose hash tag
// is tag: CRC16 (XMODEM) of the tag, modulo 16384, as the Cluster
// specification defines it. The clients compute it too but do not export
// it; TestClusterSlot checks it against CLUSTER KEYSLOT.
func clusterSlot(tag []byte) uint16 {
	var crc uint16
	for _, b := range tag {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^b]
	}
	return crc % clusterSlots
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
