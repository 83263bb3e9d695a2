package emergence

import (
	"context"
	"regexp"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/promptsafe"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// window is the calendar days whose notes are read: from and to as YYYY-MM-DD, inclusive.
type window struct {
	from, to string
}

// dayWindow is the DayRange calendar days ending today in loc.
func dayWindow(now time.Time, loc *time.Location, days int) window {
	today := now.In(loc)
	// Date arithmetic on the calendar (AddDate on a noon time), not on 24-hour steps, so that
	// a 23- or 25-hour day does not shift the window.
	noon := time.Date(today.Year(), today.Month(), today.Day(), 12, 0, 0, 0, loc)
	return window{from: noon.AddDate(0, 0, -(days - 1)).Format(time.DateOnly), to: noon.Format(time.DateOnly)}
}

// dailyName is a daily note's name. Only daily notes are emergence's input: the archive notes
// (memory/archive/YYYY-MM-DD.md, package archive) never match, so what was demoted from
// MEMORY.md does not flow back into it unasked (TestArchiveIsNotEmergenceInput).
var dailyName = regexp.MustCompile(`^memory/(\d{4}-\d{2}-\d{2})\.md$`)

// notesSlack is how many files besides the window's own may come first in name order
// (future-dated notes, other files under memory/ whose names sort above the window's).
const notesSlack = 32

// notes reads the daily notes of the window, newest first, in one query: the files under the
// longest name prefix the window's dates share, at most DayRange+notesSlack of them.
func (w *Worker) notes(ctx context.Context, agent store.Agent) ([]workspace.File, window, error) {
	loc, err := config.LoadLocation(agent.Timezone)
	if err != nil {
		loc = time.UTC
	}
	win := dayWindow(w.now(), loc, w.cfg.DayRange)
	prefix := "memory/" + commonPrefix(win.from, win.to)
	files, err := w.ws.ListContent(ctx, agent.ID, prefix, w.cfg.DayRange+notesSlack)
	if err != nil {
		return nil, win, err
	}
	out := files[:0]
	for _, f := range files {
		m := dailyName.FindStringSubmatch(f.Filename)
		if m == nil || m[1] < win.from || m[1] > win.to {
			continue
		}
		if _, err := time.Parse(time.DateOnly, m[1]); err != nil {
			continue
		}
		if strings.TrimSpace(f.Content) == "" {
			continue
		}
		out = append(out, f)
	}
	return out, win, nil
}

func commonPrefix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

// renderNotes formats notes (newest first) as the spec does, "### memory/YYYY-MM-DD.md"
// then the content, within budget bytes: older notes are left out first, and a newest note
// larger than the budget alone is cut. It returns the text and how many notes were left out.
func renderNotes(notes []workspace.File, budget int) (string, int) {
	var b strings.Builder
	for i, f := range notes {
		// A note line that looks like another note's header is escaped (promptsafe).
		part := "### " + f.Filename + "\n" + promptsafe.EscapeLines(strings.TrimRight(f.Content, "\n"), noteHeader) + "\n"
		if i > 0 {
			part = "\n" + part
		}
		if b.Len()+len(part) > budget {
			if i == 0 {
				b.WriteString(clip(part, budget))
				b.WriteString("\n[… cut: this note alone exceeds the prompt budget]\n")
				return b.String(), len(notes) - 1
			}
			return b.String(), len(notes) - i
		}
		b.WriteString(part)
	}
	return b.String(), 0
}

// noteHeader reports whether a line reads as renderNotes' "### memory/<date>.md" header.
func noteHeader(line string) bool {
	return strings.HasPrefix(strings.TrimSpace(line), "### ")
}
