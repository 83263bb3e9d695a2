// Package memsim simulates an agent's memory over months of use, through the real pipeline:
// every simulated day brings conversations, each with new facts that carry unique
// identifiers, and some facts are later corrected. A scripted model (Model) answers the
// extraction, emergence and consolidation prompts the way an accreting LLM does: it adds
// every fact to MEMORY.md and removes nothing, and when asked to consolidate it keeps what
// fits. The benchmark drives it with the scripted model; `api eval memory` drives the same
// days against the configured endpoint.
package memsim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Fact is one thing a conversation tells the agent.
type Fact struct {
	// ID is unique over the simulation, e.g. "F-000123".
	ID string
	// Text is the fact as the user says it, ID included.
	Text string
	// Corrects, when set, is the ID of an earlier fact this one corrects (the ID stays).
	Corrects string
	Day      int
}

// Conversation is one conversation of a simulated day.
type Conversation struct {
	ID    string
	Day   int
	Facts []Fact
}

// Script is the days of a simulation.
type Script struct {
	Start time.Time
	Days  [][]Conversation
}

// Options shape a script.
type Options struct {
	Days            int
	PerDay          int     // conversations a day (6)
	FactsPer        int     // new facts a conversation (2)
	CorrectionShare float64 // share of conversations that also correct an earlier fact (0.1)
	Seed            uint64
	Start           time.Time
}

var (
	subjects = []string{"the supplier for project", "the launch date of release", "the owner of ticket",
		"the minimum order for part", "the meeting room for team", "the budget code of workstream"}
	values = []string{"Acme Trading", "Saturday morning", "Chen Wei", "1,500 units", "room 4B", "BC-7731",
		"Hangzhou office", "the second week of March", "Priya", "2,000 units", "room 2A", "BC-1094"}
)

// NewScript builds a deterministic script.
func NewScript(o Options) Script {
	if o.PerDay <= 0 {
		o.PerDay = 6
	}
	if o.FactsPer <= 0 {
		o.FactsPer = 2
	}
	if o.Start.IsZero() {
		o.Start = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	}
	r := rand.New(rand.NewPCG(o.Seed, 22))
	s := Script{Start: o.Start}
	n := 0
	var all []Fact
	for d := 0; d < o.Days; d++ {
		var day []Conversation
		for c := 0; c < o.PerDay; c++ {
			conv := Conversation{ID: fmt.Sprintf("sim-d%03d-c%d", d+1, c+1), Day: d}
			for f := 0; f < o.FactsPer; f++ {
				n++
				id := fmt.Sprintf("F-%06d", n)
				fact := Fact{ID: id, Day: d, Text: fmt.Sprintf("%s: %s %d is %s", id, subjects[r.IntN(len(subjects))], 100+r.IntN(900),
					values[r.IntN(len(values))])}
				conv.Facts = append(conv.Facts, fact)
				all = append(all, fact)
			}
			if len(all) > 10 && r.Float64() < o.CorrectionShare {
				old := all[r.IntN(len(all)-2)]
				fix := Fact{ID: old.ID, Corrects: old.ID, Day: d, Text: fmt.Sprintf("%s: correction, it is now %s", old.ID, values[r.IntN(len(values))])}
				conv.Facts = append(conv.Facts, fix)
			}
			day = append(day, conv)
		}
		s.Days = append(s.Days, day)
	}
	return s
}

// Date is the simulated date of day d.
func (s Script) Date(d int) time.Time { return s.Start.AddDate(0, 0, d) }

// Facts lists every fact ever stated, the latest statement of each ID last.
func (s Script) Facts() []Fact {
	var out []Fact
	for _, day := range s.Days {
		for _, c := range day {
			out = append(out, c.Facts...)
		}
	}
	return out
}

// UserText is what the user says in a conversation.
func (c Conversation) UserText() string {
	t := "Please remember these for later."
	for _, f := range c.Facts {
		t += "\n" + f.Text
	}
	return t
}
