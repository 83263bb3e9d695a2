package window

import "sort"

// truncatedMarker ends a message cut to fit the budget, in the agent's language (the
// summarizer's transcript uses the same words).
func truncatedMarker(lang string) string {
	if lang == "en" {
		return "\n... [truncated]"
	}
	return "\n... [截断]"
}

// truncateToFit cuts the content of the largest messages of hist[from:] until they take
// at most room tokens: the last exchange is kept, an oversized message in it shortened
// (its beginning kept, marked as truncated) rather than dropped. It returns the tokens
// hist[from:] takes now and how many messages were cut; the result may still exceed room
// when the messages' overhead alone does.
func (a *assembly) truncateToFit(from, room int) (kept, cut int) {
	kept = a.tokensOf(from, len(a.hist))
	idx := make([]int, 0, len(a.hist)-from)
	for i := from; i < len(a.hist); i++ {
		idx = append(idx, i)
	}
	sort.SliceStable(idx, func(x, y int) bool { return a.hist[idx[x]].tokens > a.hist[idx[y]].tokens })
	marker := truncatedMarker(a.lang)
	for _, i := range idx {
		excess := kept - room
		if excess <= 0 {
			break
		}
		it := &a.hist[i]
		runes := []rune(it.Content)
		if len(runes) == 0 {
			continue
		}
		target := it.tokens - excess
		count := func(k int) int {
			m := it.Message
			m.Content = string(runes[:k]) + marker
			return a.counts.message(a.tk, m)
		}
		// The longest prefix whose message fits the target (0: the marker alone).
		lo, hi := 0, len(runes)-1
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if count(mid) <= target {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		n := count(lo)
		if n >= it.tokens {
			continue // cutting this message saves nothing
		}
		it.Content = string(runes[:lo]) + marker
		kept -= it.tokens - n
		it.tokens = n
		cut++
	}
	return kept, cut
}
