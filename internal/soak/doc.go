// Package soak is a bounded chaos soak of the Redis store: worker processes
// decide a mix of policies and hold leases through sluice and redisstore
// against a standalone server, a Redis Cluster and a Sentinel setup while
// faults are injected, and an independent checker counts what the faults
// cost from the send and reply times of every call.
package soak
