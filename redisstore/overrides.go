package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/store"
)

// Runtime overrides (store.OverrideStore) are three keys under one hash
// tag of their own, so that one script reads or writes them atomically on
// one Cluster master:
//
//	<prefix>:{!overrides}:set       a hash: ID -> the override's value
//	<prefix>:{!overrides}:until     a sorted set: ID scored by the µs it
//	                                expires at, for those that do
//	<prefix>:{!overrides}:version   "<epoch>:<changes>", moved by every change
//
// No window or queue key can take this tag: theirs start with an encoded
// name, which never holds '!'. The keys do not expire: overrides live until
// deleted, or past their expiry until the next write drops them. They are
// read and written by two small scripts of their own (overrides_read.lua,
// overrides_write.lua), over the rueidis client: a store made by
// NewFromEvaler keeps none.

//go:embed overrides_read.lua
var overridesReadLua string

//go:embed overrides_write.lua
var overridesWriteLua string

var (
	overridesRead  = rueidis.NewLuaScript(overridesReadLua)
	overridesWrite = rueidis.NewLuaScript(overridesWriteLua)
)

var _ store.OverrideStore = (*Store)(nil)

// overrideKeys returns the keys of the overrides: the set, the expiries
// and the version.
func (s *Store) overrideKeys() []string {
	base := s.names.prefix + ":{!overrides}:"
	return []string{base + "set", base + "until", base + "version"}
}

// overridesClient returns the client the overrides are read and written
// with.
func (s *Store) overridesClient() (rueidis.Client, error) {
	switch {
	case s.closed.Load():
		return nil, store.ErrClosed
	case s.client == nil:
		return nil, errors.New("redisstore: runtime overrides need a rueidis client; make the store with New or NewFromClient")
	}
	return s.client, nil
}

// ReadOverrides implements store.OverrideStore.
func (s *Store) ReadOverrides(ctx context.Context, known string) (store.OverrideSet, error) {
	c, err := s.overridesClient()
	if err != nil {
		return store.OverrideSet{}, err
	}
	reply, err := overridesRead.Exec(ctx, c, s.overrideKeys(), []string{known, s.nowArg()}).AsStrSlice()
	if err != nil {
		return store.OverrideSet{}, fmt.Errorf("redisstore: reading the overrides: %w", err)
	}
	if len(reply) == 0 || (len(reply)-1)%3 != 0 {
		return store.OverrideSet{}, fmt.Errorf("redisstore: reading the overrides: a reply of %d values, want 1 and 3 per override", len(reply))
	}
	set := store.OverrideSet{Version: reply[0], Changed: reply[0] != known}
	if !set.Changed {
		return set, nil
	}
	for i := 1; i < len(reply); i += 3 {
		ov := store.StoredOverride{ID: reply[i], Value: []byte(reply[i+1])}
		if u := reply[i+2]; u != "" {
			us, err := strconv.ParseFloat(u, 64)
			if err != nil {
				return store.OverrideSet{}, fmt.Errorf("redisstore: reading the overrides: override %q expires at %q, not a number", ov.ID, u)
			}
			ov.Until = time.UnixMicro(int64(us))
		}
		set.Overrides = append(set.Overrides, ov)
	}
	slices.SortFunc(set.Overrides, func(a, b store.StoredOverride) int { return strings.Compare(a.ID, b.ID) })
	return set, nil
}

// WriteOverride implements store.OverrideStore.
func (s *Store) WriteOverride(ctx context.Context, o store.StoredOverride, max int) (string, error) {
	until := ""
	if !o.Until.IsZero() {
		until = strconv.FormatInt(o.Until.UnixMicro(), 10)
	}
	status, version, err := s.writeOverride(ctx, "set", o.ID, string(o.Value), until, strconv.Itoa(max))
	if err == nil && status < 0 {
		err = store.ErrTooManyOverrides
	}
	return version, err
}

// DeleteOverride implements store.OverrideStore.
func (s *Store) DeleteOverride(ctx context.Context, id string) (bool, string, error) {
	status, version, err := s.writeOverride(ctx, "del", id)
	return status == 1, version, err
}

// writeOverride runs overrides_write.lua with op, id and args after the
// time, and returns its status and the version.
func (s *Store) writeOverride(ctx context.Context, op, id string, args ...string) (int64, string, error) {
	c, err := s.overridesClient()
	if err != nil {
		return 0, "", err
	}
	reply, err := overridesWrite.Exec(ctx, c, s.overrideKeys(), append([]string{op, id, s.nowArg()}, args...)).ToArray()
	if err != nil {
		return 0, "", fmt.Errorf("redisstore: writing an override: %w", err)
	}
	if len(reply) != 2 {
		return 0, "", fmt.Errorf("redisstore: writing an override: a reply of %d values, want 2", len(reply))
	}
	status, err := reply[0].AsInt64()
	if err != nil {
		return 0, "", fmt.Errorf("redisstore: writing an override: the status: %w", err)
	}
	version, err := reply[1].ToString()
	if err != nil {
		return 0, "", fmt.Errorf("redisstore: writing an override: the version: %w", err)
	}
	return status, version, nil
}
