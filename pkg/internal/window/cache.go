package window

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/bus"
)

// Bucket is the NATS KV bucket of conversation summaries that every API replica shares.
// Its TTL is mate.agent.conversation.window.summary-cache-minutes.
//
// Keys, where <c> is a hash of (agent, conversation, language) and <h> a hash chained over
// the contents of the messages a summary covers (so a key names exactly what it summarizes):
//
//	<c>.<h>.s   the summary of that prefix (JSON summaryEntry)
//	<c>.<h>.l   in-flight marker of the replica computing it (JSON lockValue)
//	<c>.<h>.f   a recent failure to compute it (JSON failValue), so replicas degrade at once
//	            instead of each calling a failing LLM
//	<c>.head    the prefixes summarized lately (JSON head), to find one to extend
const Bucket = "mate_context_summary"

// summaryEntry is a cached summary of the first Covers messages of a conversation.
type summaryEntry struct {
	Text      string    `json:"text"`
	Covers    int       `json:"covers"`
	LastID    int64     `json:"lastId,omitempty"`
	Language  string    `json:"language"`
	Model     string    `json:"model,omitempty"`
	TokensIn  int       `json:"tokensIn,omitempty"`
	TokensOut int       `json:"tokensOut,omitempty"`
	Written   time.Time `json:"written"`
	// Goal is the conversation's first real user message (the original-goal anchor).
	Goal string `json:"goal,omitempty"`
	// Chain is the full chained hash of the covered messages, so the next summary can
	// continue the chain without reading them again.
	Chain string `json:"chain,omitempty"`
	// Encoding and PrefixTokens: what the covered messages cost with that tokenizer.
	Encoding     string `json:"encoding,omitempty"`
	PrefixTokens int    `json:"prefixTokens,omitempty"`
}

type headEntry struct {
	N int    `json:"n"`
	H string `json:"h"`
}

type head struct {
	Entries []headEntry `json:"entries"`
}

const maxHeadEntries = 16

type lockValue struct {
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"`
}

type failValue struct {
	Owner   string    `json:"owner"`
	Reason  string    `json:"reason"`
	Expires time.Time `json:"expires"`
}

// errWaitTimeout: another replica held the in-flight marker longer than we could wait.
var errWaitTimeout = errors.New("timed out waiting for another replica's summary")

// sharedFailure: another replica failed to compute this summary moments ago.
type sharedFailure struct{ owner, reason string }

func (e *sharedFailure) Error() string {
	return fmt.Sprintf("summary failed moments ago on %s: %s", e.owner, e.reason)
}

// computeError wraps a failure of the compute function (the LLM), as opposed to the cache.
type computeError struct{ err error }

func (e *computeError) Error() string { return e.err.Error() }
func (e *computeError) Unwrap() error { return e.err }

type kvCache struct {
	kv      jetstream.KeyValue
	ttl     time.Duration
	owner   string
	lockTTL time.Duration
	failTTL time.Duration
	wait    time.Duration
	now     func() time.Time
	// waiting, when set, counts requests waiting on another replica's marker.
	waiting prometheus.Gauge
}

func openCache(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	if replicas < 1 {
		replicas = 1
	}
	kv, err := bus.EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: bucket, TTL: ttl, History: 1, Replicas: replicas, Storage: jetstream.FileStorage,
		Description: "MateMemory conversation summaries for context compaction",
	})
	if err != nil {
		return nil, fmt.Errorf("summary cache bucket %s: %w", bucket, err)
	}
	return kv, nil
}

func summaryKey(ck, h string) string { return ck + "." + h + ".s" }
func lockKey(ck, h string) string    { return ck + "." + h + ".l" }
func failKey(ck, h string) string    { return ck + "." + h + ".f" }
func headKey(ck string) string       { return ck + ".head" }

func (c *kvCache) get(ctx context.Context, ck, h string) (summaryEntry, bool, error) {
	var e summaryEntry
	kve, err := c.kv.Get(ctx, summaryKey(ck, h))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return e, false, nil
	}
	if err != nil {
		return e, false, err
	}
	if err := json.Unmarshal(kve.Value(), &e); err != nil || e.Text == "" {
		return e, false, nil // unreadable entries are misses; they expire with the bucket TTL
	}
	return e, true, nil
}

// best finds the cached summary of the longest prefix of at most boundary messages whose
// chained hash matches; valid(n) reports the hash of prefix n, or "" when n cannot be used.
func (c *kvCache) best(ctx context.Context, ck string, boundary int, hashAt func(n int) string) (summaryEntry, int, bool, error) {
	if h := hashAt(boundary); h != "" {
		e, ok, err := c.get(ctx, ck, h)
		if err != nil {
			return e, 0, false, err
		}
		if ok && e.Covers == boundary {
			return e, boundary, true, nil
		}
	}
	hd, _, err := c.head(ctx, ck)
	if err != nil {
		return summaryEntry{}, 0, false, err
	}
	sort.Slice(hd.Entries, func(i, j int) bool { return hd.Entries[i].N > hd.Entries[j].N })
	for _, he := range hd.Entries {
		if he.N <= 0 || he.N >= boundary || hashAt(he.N) != he.H {
			continue
		}
		e, ok, err := c.get(ctx, ck, he.H)
		if err != nil {
			return e, 0, false, err
		}
		if ok && e.Covers == he.N {
			return e, he.N, true, nil
		}
	}
	return summaryEntry{}, 0, false, nil
}

func (c *kvCache) head(ctx context.Context, ck string) (head, uint64, error) {
	var hd head
	kve, err := c.kv.Get(ctx, headKey(ck))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return hd, 0, nil
	}
	if err != nil {
		return hd, 0, err
	}
	_ = json.Unmarshal(kve.Value(), &hd)
	return hd, kve.Revision(), nil
}

// store writes a summary and records its prefix in the head.
func (c *kvCache) store(ctx context.Context, ck, h string, e summaryEntry) error {
	e.Written = c.now().UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := c.kv.Put(ctx, summaryKey(ck, h), b); err != nil {
		return fmt.Errorf("store summary: %w", err)
	}
	return c.addHead(ctx, ck, headEntry{N: e.Covers, H: h})
}

// addHead puts he first in the head with a revision-checked write, retrying on a race.
func (c *kvCache) addHead(ctx context.Context, ck string, he headEntry) error {
	var err error
	for attempt := 0; attempt < 8; attempt++ {
		var hd head
		var rev uint64
		hd, rev, err = c.head(ctx, ck)
		if err != nil {
			return err
		}
		entries := []headEntry{he}
		for _, x := range hd.Entries {
			if x != he && len(entries) < maxHeadEntries {
				entries = append(entries, x)
			}
		}
		b, _ := json.Marshal(head{Entries: entries})
		if rev == 0 {
			_, err = c.kv.Create(ctx, headKey(ck), b)
		} else {
			_, err = c.kv.Update(ctx, headKey(ck), b, rev)
		}
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return fmt.Errorf("update summary head: %w", err)
}

// touch rewrites an entry read more than half its TTL after it was written, so a summary in
// steady use does not expire under an active conversation.
func (c *kvCache) touch(ctx context.Context, ck, h string, e summaryEntry) {
	if c.now().Sub(e.Written) < c.ttl/2 {
		return
	}
	_ = c.store(ctx, ck, h, e)
}

// singleFlight returns the summary under (ck, h), computing it here only if no replica has
// it or is computing it. Every replica follows the same protocol on the bucket:
//
//   - a summary present under .s is returned;
//   - a fresh failure under .f is returned as *sharedFailure (no new LLM call);
//   - otherwise the replica that creates .l (KV Create: exactly one succeeds) computes,
//     writes .s (or .f), then deletes .l; the others watch the three keys and take the
//     result; an .l whose holder died is taken over (revision-checked Update) once expired.
//
// computed is true when this replica ran compute. Errors: *computeError (compute failed),
// *sharedFailure, errWaitTimeout, a context error, or a KV error (the caller may compute
// without coordination).
func (c *kvCache) singleFlight(ctx context.Context, ck, h string,
	compute func(ctx context.Context, renew func(context.Context) error) (summaryEntry, error),
) (e summaryEntry, computed bool, err error) {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := c.kv.Watch(wctx, ck+"."+h+".*")
	if err != nil {
		return e, false, fmt.Errorf("watch summary keys: %w", err)
	}
	defer func() { _ = w.Stop() }()

	wait := &waitMark{gauge: c.waiting}
	defer wait.set(false)
	state := prefixKeys{}
	deadline := c.now().Add(c.wait)
	initial := true
	timer := time.NewTimer(c.wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return e, false, ctx.Err()
		case kve, ok := <-w.Updates():
			if !ok {
				return e, false, errors.New("summary key watcher closed")
			}
			if kve == nil {
				initial = false
			} else {
				state.apply(kve)
			}
			if initial {
				continue
			}
		case <-timer.C:
		}

		if e, ok := state.summary(); ok {
			return e, false, nil
		}
		now := c.now()
		if err := state.failure(now); err != nil {
			return e, false, err
		}
		rev, l, lv, lerr := c.claim(ctx, ck, h, state, now)
		if lerr == nil {
			// Our look at the keys may be older than the marker we just created: another
			// replica can have computed, shared and cleared its marker in between (Create
			// succeeds over a delete marker). Its summary is then used, not computed again.
			if done, ok, gerr := c.get(ctx, ck, h); gerr == nil && ok {
				_ = c.kv.Delete(ctx, lockKey(ck, h), jetstream.LastRevision(rev))
				return done, false, nil
			}
			wait.set(false)
			e, err := c.holdAndCompute(ctx, ck, h, rev, compute)
			return e, true, err
		}
		if ctx.Err() != nil {
			return e, false, ctx.Err()
		}
		if !errors.Is(lerr, jetstream.ErrKeyExists) && l == nil {
			return e, false, fmt.Errorf("create in-flight marker: %w", lerr)
		}
		// Someone else holds it (or won the race to create it): wait for its outcome, for
		// its marker to expire, or for our deadline.
		if !now.Before(deadline) {
			return e, false, errWaitTimeout
		}
		wait.set(true)
		wake := deadline.Sub(now)
		if l != nil && lv.Expires.After(now) && lv.Expires.Sub(now) < wake {
			wake = lv.Expires.Sub(now) + 10*time.Millisecond
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wake)
	}
}

// prefixKeys are the live keys of one summary prefix, by suffix (s, l, f), as the watcher
// last saw them.
type prefixKeys map[string]jetstream.KeyValueEntry

func (p prefixKeys) apply(kve jetstream.KeyValueEntry) {
	suffix := kve.Key()[strings.LastIndexByte(kve.Key(), '.')+1:]
	if kve.Operation() == jetstream.KeyValuePut {
		p[suffix] = kve
	} else {
		delete(p, suffix)
	}
}

// summary is the shared summary, when one is there and readable.
func (p prefixKeys) summary() (e summaryEntry, ok bool) {
	if s := p["s"]; s != nil {
		if err := json.Unmarshal(s.Value(), &e); err == nil && e.Text != "" {
			return e, true
		}
	}
	return e, false
}

// failure is the failure another replica shared, while it has not expired.
func (p prefixKeys) failure(now time.Time) error {
	if f := p["f"]; f != nil {
		var fv failValue
		if json.Unmarshal(f.Value(), &fv) == nil && now.Before(fv.Expires) {
			return &sharedFailure{owner: fv.Owner, reason: fv.Reason}
		}
	}
	return nil
}

// claim tries to take the in-flight marker: create it when there is none, take it over when
// it expired. l and lv are the marker seen (nil when none); a marker held by another is
// ErrKeyExists.
func (c *kvCache) claim(ctx context.Context, ck, h string, p prefixKeys, now time.Time) (rev uint64, l jetstream.KeyValueEntry, lv lockValue, err error) {
	l = p["l"]
	if l != nil {
		_ = json.Unmarshal(l.Value(), &lv)
	}
	switch {
	case l == nil:
		rev, err = c.kv.Create(ctx, lockKey(ck, h), c.lockValue())
	case now.After(lv.Expires):
		rev, err = c.kv.Update(ctx, lockKey(ck, h), c.lockValue(), l.Revision())
	default:
		err = jetstream.ErrKeyExists
	}
	return rev, l, lv, err
}

// waitMark counts one request in the waiting gauge (when there is one) while it waits on
// another replica's marker.
type waitMark struct {
	gauge prometheus.Gauge
	on    bool
}

func (m *waitMark) set(on bool) {
	if m.on != on && m.gauge != nil {
		if on {
			m.gauge.Inc()
		} else {
			m.gauge.Dec()
		}
	}
	m.on = on
}

func (c *kvCache) lockValue() []byte {
	b, _ := json.Marshal(lockValue{Owner: c.owner, Expires: c.now().Add(c.lockTTL).UTC()})
	return b
}

func (c *kvCache) holdAndCompute(ctx context.Context, ck, h string, rev uint64,
	compute func(ctx context.Context, renew func(context.Context) error) (summaryEntry, error),
) (summaryEntry, error) {
	renew := func(ctx context.Context) error {
		next, err := c.kv.Update(ctx, lockKey(ck, h), c.lockValue(), rev)
		if err != nil {
			return fmt.Errorf("renew in-flight marker: %w", err)
		}
		rev = next
		return nil
	}
	e, err := compute(ctx, renew)
	// Clean up even if the caller has gone: the others are waiting on these keys.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	switch {
	case err == nil:
		if serr := c.store(cctx, ck, h, e); serr != nil {
			_ = c.kv.Delete(cctx, lockKey(ck, h), jetstream.LastRevision(rev))
			return e, nil // the result is good; only sharing it failed
		}
	case ctx.Err() == nil:
		b, _ := json.Marshal(failValue{Owner: c.owner, Reason: err.Error(), Expires: c.now().Add(c.failTTL).UTC()})
		_, _ = c.kv.Put(cctx, failKey(ck, h), b)
		err = &computeError{err: err}
	default:
		err = ctx.Err()
	}
	_ = c.kv.Delete(cctx, lockKey(ck, h), jetstream.LastRevision(rev))
	return e, err
}

// CacheKeyPrefix is the prefix of every key the summary cache holds for one conversation of
// an agent in a language ("<c>."): an erasure removes the keys under it.
func CacheKeyPrefix(agentID int64, conversationID, lang string) string {
	return conversationKey(agentID, conversationID, lang) + "."
}
