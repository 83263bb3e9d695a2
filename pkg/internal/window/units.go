package window

// A unit is what compaction moves as one piece: a single message, or an assistant message
// that calls tools together with the tool results that answer it. Units are never split,
// so a tool call is never separated from its result.
type unit struct{ start, end int } // [start, end) in the history

// An exchange starts at a user message and runs to the next one; history before the first
// user message forms an exchange of its own.

// layout is the unit and exchange structure of a history.
type layout struct {
	units []unit
	// exStart[i] is the index into units of the first unit of exchange i.
	exStart []int
}

func buildLayout(h []item) layout {
	var l layout
	for i := 0; i < len(h); {
		j := i + 1
		if h[i].Role == RoleAssistant && len(h[i].ToolCalls) > 0 {
			ids := make(map[string]bool, len(h[i].ToolCalls))
			for _, c := range h[i].ToolCalls {
				ids[c.ID] = true
			}
			for j < len(h) && h[j].Role == RoleTool && ids[h[j].ToolCallID] {
				j++
			}
		}
		if h[i].Role == RoleUser || len(l.units) == 0 {
			l.exStart = append(l.exStart, len(l.units))
		}
		l.units = append(l.units, unit{i, j})
		i = j
	}
	return l
}

// exchangeStartItem is the history index where the last n exchanges begin (0 when there are
// n or fewer).
func (l layout) exchangeStartItem(n int) int {
	if n >= len(l.exStart) || n < 0 {
		return 0
	}
	return l.units[l.exStart[len(l.exStart)-n]].start
}

// unitAt returns the index of the unit starting at history index i, or -1.
func (l layout) unitStartingAt(i int) int {
	lo, hi := 0, len(l.units)
	for lo < hi {
		m := (lo + hi) / 2
		if l.units[m].start < i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(l.units) && l.units[lo].start == i {
		return lo
	}
	return -1
}
