// Package redisstore is the Redis sluice.Store: every process that points at
// the same Redis shares the same windows, and Redis's own clock orders their
// events.
//
// Each rule's window is a sorted set, one per combination of the rule's By
// attribute values. One Lua script, decide.lua, decides a request against
// every rule of its policy in a single round trip: it checks each rule, then
// records the request in every rule's window or in none (sluice.ModeAllow)
// or always (ModeRecord), or, for a dry run (a peek), computes what it would
// leave and writes nothing. A denied request changes nothing, not even a
// key's expiry. The semantics are those of package memstore, and
// the conformance suite in package storetest holds both to them.
//
// # Entries
//
// A window holds one entry per microsecond at which it recorded something
// (window.lua lays it out). The entry's score is that time in whole
// microseconds after the key's epoch (Redis's TIME, or Config.Clock); its
// member is the key's running total of cost up to and including the entry
// ("end"), followed by ":<cost>" when the cost is not 1: "7", "12:5".
// Requests recorded in one microsecond share its entry, so scores are
// unique, and a request of cost N is one entry. One more member,
// "@<epoch>" scored +inf, is always last. Both numbers stay small integers
// (8.6 bytes per event in a full listpack window of 100): ends and epoch
// restart whenever the window is empty, and a key that never empties is
// rebased before its scores pass 2^30 µs. The count in a window is the
// newest entry's end minus the oldest counted entry's end less its cost:
// two reads, however many entries the window holds, and one while the
// key's epoch is still in the window (nothing has left it: the count is the
// newest entry's end). Recording trims the
// entries that left the window, once per 8 units of cost recorded in the
// key (they no longer count; keeping a few a little longer saves a command
// on most writes), but keeps the newest one, for the minimum gap. A sorted
// set whose last member is not an epoch is not a window: deciding on it is
// an error, and it is left as it is.
//
// Per rule, an allowed request costs the script four Redis commands on a key
// older than its window (ZRANGE, ZRANGEBYSCORE, ZADD, PEXPIREAT, and
// ZREMRANGEBYSCORE once per 8 units of cost), three on a younger one or an
// empty one; a denied request or a peek reads one or two. A GCRA rule
// costs three (GET, INCRBY or SET, PEXPIREAT), a sliding counter's two
// (GET, SET; its expiry moves only with its bucket), as do a calendar
// quota (its expiry moves only with its period, when the count of the
// period before goes to its history) and a credits balance (which never
// expires). Within one batch (see Batching), a
// key already written at the batch's time is read no more, and requests
// recorded into its newest entry write it once, at the end. RetryAfter
// comes from the oldest counted entry's time, one more read; only when
// freeing its cost is not enough does one ZRANGEBYSCORE read at most
// used+cost-limit entries instead.
//
// Every written key expires its rule's Window plus MinGap after the write
// (a GCRA bucket when it is full again, a counter when the bucket after its
// current one ends, a calendar quota when its period ends, plus History
// times store.MaxPeriodLength with a history; a credits balance never):
// at that absolute time of Redis's clock, rounded up to
// a millisecond (PEXPIREAT), or on a store given its own clock that long
// after the write on Redis's (PEXPIRE).
//
// # Keys
//
//	<prefix>:{<policy>[,<shared values>]}2<kind>:<rule>[:<values>]
//
// "2" is the key layout (Config.Layout; Layout1 is the names of earlier
// versions, kept for rolling upgrades) and <kind> one letter for what the
// key holds: l a log, g a GCRA bucket, c a sliding counter, p a calendar
// quota's count, b a credits balance (q a schedule's queue). The hash tag in braces is the policy name followed by the values of the
// attributes that every rule of the policy names (sluice.Policy's
// SharedAttributes), so all the keys of one decision live in one Redis
// Cluster slot: the notifier's global + per-category policy is one slot, and a
// policy whose rules all go by user spreads its users over the cluster. A
// decision therefore never spans slots; the price is that a policy with a
// rule that has no By (a global cap) keeps all of its keys in one slot.
//
// That is Config.Slots' SlotsShared, the default on a standalone server and
// under Sentinel. On a Redis Cluster the default is SlotsPerRule: each
// rule's hash tag is the policy name followed by the values of the rule's
// own By attributes, so per-user keys spread over the cluster and a global
// cap has a slot of its own. Rules whose tags are equal for a request form a
// slot group, decided by one script call; a policy of several groups is
// decided group by group (decide.lua in "group" mode), and when a later group denies,
// rollback.lua removes the entries the earlier groups wrote (crossslot.go
// and docs/topologies.md say what this guarantees and what a failure
// between the steps costs: over-counting until the window passes, never
// over-admitting).
// <values> are the rule's By attribute values in order, joined by ',',
// written only when the hash tag does not hold them already: a rule without
// By, a rule that goes by the shared attributes alone and every rule under
// SlotsPerRule have no values part. Names and values are percent-encoded (every
// byte outside A-Z a-z 0-9 . - _ ~ becomes %XX), so no input can add '{',
// '}', ':' or ','; a part whose encoding exceeds 64 bytes is replaced by '#'
// and 32 hex digits of its SHA-256, so no input can make a key long. For
// example, policy "notify" with rules global and category, for category
// "a:b", uses
//
//	sluice:{notify}2l:global
//	sluice:{notify}2l:category:a%3Ab
//
// # Scripts, functions and failures
//
// Over rueidis on Redis 7 and later, decide.lua, and the lease scripts
// lease.lua and finish.lua, run as Redis functions (FCALL of one library
// loaded with FUNCTION LOAD, named after the hash of its source): their
// helpers are made once, not on every call (a call of one decision cost
// the server about 160,000 instructions as a script, and 80,000 to 90,000
// as a function). A server without functions, or whose ACL refuses them to
// the store's user, runs them as scripts, as every other script of the
// package runs, and as they run through an Evaler of another client. Scripts run with EVALSHA; when Redis answers
// NOSCRIPT (after a restart, a failover or SCRIPT FLUSH) the store runs the
// script with EVAL, which loads it, once; when it answers "Function not
// found" (a restart without persistence, FUNCTION FLUSH) the store loads
// the library on that node and calls it again, once. A script that was sent
// and whose reply was lost is never sent again, since it may have recorded
// its request: the error is returned, and the sluice.Limiter applies its
// failure policy.
//
// # Batching
//
// A store made by New or NewFromClient batches its decisions: while two
// script calls are in flight (per master on a Redis Cluster; batch.go says
// how a batch of several slots reaches its master), the decisions that
// arrive wait and then go out together as one call of decide.lua, which
// decides each of them in turn as it would decide it alone, so each is as
// atomic and exact as alone. Under light load a decision goes out
// at once, alone; under heavy load the server runs one script per batch
// instead of one per decision. Within a batch, a key that an earlier
// decision wrote is not read again nor its expiry set again: the script
// knows its state (a global cap over per-user caps reads, writes and
// expires its global key once per batch). A failed batch fails each of its
// decisions, an error raised by one decision fails that one only, and a
// batch is never sent again. A caller whose context ends while its decision
// waits gets the context's error and its decision is not sent. Through an
// Evaler of another client, every decision is its own call.
//
// Config.Mode selects a standalone server, a Redis Cluster or a master found
// through Redis Sentinel; ParseURL reads the same from a URL. Over a Cluster
// the Store is a store.Sharded: it names the masters of each request's
// windows (read from CLUSTER SLOTS every second), and the Limiter keeps a
// circuit breaker per master, or per set of masters for a request whose
// rules lie on several, so one master's outage degrades only the requests
// that need it. Over rueidis it also sends each script call to the master
// its slot map names; the first MOVED reply (a failover, a resharding)
// makes it read the map again at once from the node that sent it, and the
// command, which did not run, goes to the new master: a failover costs a
// process one redirect, not one per call until the client's own refresh.
//
// # Failovers
//
// Redis replicates asynchronously: a SENTINEL FAILOVER promotes a replica
// without waiting for its master, which answers writes for about a second
// more, and those admissions are lost, each one admitted again later. With
// Config.WaitForReplicas every script call waits (WAIT) until the master's
// replicas have its writes, and fails with ErrNotReplicated otherwise: no
// admission a caller saw is lost, and the new master serves as soon as the
// client follows it. A replica that leaves for good stops admissions until
// it is back, or for Config.ReplicaGrace when set. Over a Redis Cluster each
// master's replicas are counted for its own slots: CLUSTER FAILOVER waits
// for the replica itself, but CLUSTER FAILOVER TAKEOVER and FORCE, and a
// failover after a master stops answering, do not.
//
// The store needs Redis 5 or later (scripts that read TIME and then write
// rely on effect replication), and 6.0 or later for the sliding counter
// (SET ... KEEPTTL); it runs decide.lua and the lease scripts as functions on 7.0 and later.
package redisstore
