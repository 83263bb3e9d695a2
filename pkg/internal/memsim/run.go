package memsim

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

// Env is the service a simulation drives: its REST API, the agent, and (for a service the
// simulation owns) its clock.
type Env struct {
	Client *client.Client
	// Admin, when set, is a client with an admin key (the dead letters are counted with it).
	Admin *client.Client
	Agent int64
	// SetNow moves the service's clock to a simulated time; nil runs in real time (all days
	// then land in today's note).
	SetNow func(time.Time)
	// Count counts tokens as the pipeline does (the core file sizes).
	Count tokens.Tokenizer
}

// RunOptions shape a run.
type RunOptions struct {
	// Label names the run in the report ("edits", "spec").
	Label string
	// Emergence runs the emergence at the end of every day (the nightly consolidation).
	Emergence bool
	// ContextTokens is the model context the spec's whole files are held against (128,000).
	ContextTokens int
	// K is the recall cut-off (5).
	K int
	// Progress, when set, gets a line per simulated month.
	Progress io.Writer
}

// Month is one simulated month's figures.
type Month struct {
	Month int
	// Days is the month's simulated days (30, fewer for the last).
	Days int
	// CoreMax and CoreEnd are MEMORY.md's and PROFILE.md's tokens: the highest at the end of
	// a day, and at the end of the month. OverBudgetDays counts days that ended above a budget.
	CoreMax, CoreEnd, OverBudgetDays int
	Extractions                      int
	// OutMedian and InMedian are the median output and input tokens of an extraction.
	OutMedian, InMedian int
	// Refused and Failed count extractions refused (an edit that does not apply, the rewrite
	// guard) and failed or dead-lettered.
	Refused, Failed int
	// ArchiveBytes is the archive's size at the end of the month.
	ArchiveBytes int
}

// Report is a run's result.
type Report struct {
	Label  string
	Months []Month
	// Facts is the number of distinct fact identifiers; Found those whose latest statement a
	// search by identifier returns in the top K; Lost those in neither MEMORY.md nor the
	// archive nor a daily note (silent losses).
	Facts, Found, Lost int
	Recall             float64
	// Missed shows up to five facts the search did not find, with what it returned.
	Missed      []string
	DeadLetters int
	// ContextDay is the first day the core files passed ContextTokens (0: not within the run);
	// ProjectedContextDay extrapolates the last month's growth when it did not happen.
	ContextDay, ProjectedContextDay int
	Duration                        time.Duration
}

type day struct{ core, over int }

// Run drives the script through the service and measures it.
func Run(ctx context.Context, env Env, s Script, o RunOptions) (Report, error) {
	if o.ContextTokens <= 0 {
		o.ContextTokens = 128000
	}
	if o.K <= 0 {
		o.K = 5
	}
	start := time.Now()
	rep := Report{Label: o.Label}
	var days []day
	var runs []client.Run
	for d, convs := range s.Days {
		for c, conv := range convs {
			at := s.Date(d).Add(time.Duration(c) * 90 * time.Minute)
			if env.SetNow != nil {
				env.SetNow(at)
			}
			run, err := converse(ctx, env, conv, at)
			if err != nil {
				return rep, fmt.Errorf("day %d, %s: %w", d+1, conv.ID, err)
			}
			runs = append(runs, *run)
		}
		if o.Emergence {
			if env.SetNow != nil {
				env.SetNow(s.Date(d).Add(14 * time.Hour))
			}
			if _, err := env.Client.Emergence(ctx, env.Agent); err != nil {
				return rep, fmt.Errorf("day %d emergence: %w", d+1, err)
			}
		}
		dd, err := coreSize(ctx, env)
		if err != nil {
			return rep, err
		}
		days = append(days, dd)
		if rep.ContextDay == 0 && dd.core > o.ContextTokens {
			rep.ContextDay = d + 1
		}
		if (d+1)%30 == 0 || d == len(s.Days)-1 {
			m, err := month(ctx, env, (d+29)/30, days, runs)
			if err != nil {
				return rep, err
			}
			rep.Months = append(rep.Months, m)
			days, runs = days[:0], runs[:0]
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "%s month %d: core %d tokens (max %d), %d extractions, out p50 %d, in p50 %d, archive %d B\n",
					o.Label, m.Month, m.CoreEnd, m.CoreMax, m.Extractions, m.OutMedian, m.InMedian, m.ArchiveBytes)
			}
		}
	}
	if rep.ContextDay == 0 && len(rep.Months) >= 2 {
		last, prev := rep.Months[len(rep.Months)-1], rep.Months[len(rep.Months)-2]
		if growth := float64(last.CoreEnd-prev.CoreEnd) / float64(max(last.Days, 1)); growth > 0 {
			rep.ProjectedContextDay = len(s.Days) + int(float64(o.ContextTokens-last.CoreEnd)/growth)
		}
	}
	if err := recallFacts(ctx, env, s, o.K, &rep); err != nil {
		return rep, err
	}
	if env.Admin != nil {
		dl, err := env.Admin.DeadLetters(ctx, client.DeadLetterFilter{Limit: 1000})
		if err != nil {
			return rep, fmt.Errorf("dead letters: %w", err)
		}
		rep.DeadLetters = len(dl)
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

func converse(ctx context.Context, env Env, conv Conversation, at time.Time) (*client.Run, error) {
	e := &event.ConversationCompletedEvent{EventID: "ev-" + conv.ID, OccurredAt: at, AgentID: env.Agent, ConversationID: conv.ID,
		UserMessage: conv.UserText(), AssistantReply: "Noted, I will remember.", MessageCount: 2, TriggerSource: "api",
		Messages: []event.Message{{Role: "user", Content: conv.UserText()}, {Role: "assistant", Content: "Noted, I will remember."}}}
	ack, err := env.Client.PublishCompletion(ctx, e)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return env.Client.WaitRun(wctx, env.Agent, ack.EventID, client.WithPollInterval(5*time.Millisecond, 100*time.Millisecond))
}

func coreSize(ctx context.Context, env Env) (day, error) {
	var d day
	for _, name := range []string{"MEMORY.md", "PROFILE.md"} {
		f, err := env.Client.ReadFile(ctx, env.Agent, name)
		if err != nil {
			return d, fmt.Errorf("read %s: %w", name, err)
		}
		n := env.Count.Count(f.Content)
		d.core += n
		if f.BudgetTokens != nil && n > *f.BudgetTokens {
			d.over++
		}
	}
	return d, nil
}

func month(ctx context.Context, env Env, n int, days []day, runs []client.Run) (Month, error) {
	m := Month{Month: n, Days: len(days), Extractions: len(runs)}
	for _, d := range days {
		m.CoreMax = max(m.CoreMax, d.core)
		if d.over > 0 {
			m.OverBudgetDays++
		}
	}
	if len(days) > 0 {
		m.CoreEnd = days[len(days)-1].core
	}
	var in, out []int
	for _, r := range runs {
		switch r.Status {
		case client.StatusRefused:
			m.Refused++
		case client.StatusFailed:
			m.Failed++
		}
		in, out = append(in, r.TokensIn), append(out, r.TokensOut)
	}
	m.InMedian, m.OutMedian = median(in), median(out)
	files, err := env.Client.ListFiles(ctx, env.Agent, "memory/archive/")
	if err != nil {
		return m, err
	}
	for _, f := range files {
		m.ArchiveBytes += int(f.FileSize)
	}
	return m, nil
}

func median(v []int) int {
	if len(v) == 0 {
		return 0
	}
	sort.Ints(v)
	return v[len(v)/2]
}

// recallFacts searches every fact identifier and checks that its latest statement is in the
// top k, and that it is kept somewhere (MEMORY.md, the archive or a daily note).
func recallFacts(ctx context.Context, env Env, s Script, k int, rep *Report) error {
	latest := map[string]Fact{}
	var ids []string
	for _, f := range s.Facts() {
		if _, ok := latest[f.ID]; !ok {
			ids = append(ids, f.ID)
		}
		latest[f.ID] = f
	}
	files, err := keptFiles(ctx, env)
	if err != nil {
		return err
	}
	var all strings.Builder
	for _, c := range files {
		all.WriteString(c)
		all.WriteString("\n")
	}
	kept := all.String()
	rep.Facts = len(ids)
	for _, id := range ids {
		want := latest[id].Text
		if !strings.Contains(kept, want) {
			rep.Lost++
		}
		res, err := env.Client.SearchMemory(ctx, env.Agent, client.MemoryQuery{Query: id, MaxResults: k})
		if err != nil {
			return fmt.Errorf("search %s: %w", id, err)
		}
		found := false
		for _, h := range res.Hits {
			if strings.Contains(h.Snippet, want) || holds(files[h.Filename], h, want) {
				found = true
				break
			}
		}
		if found {
			rep.Found++
		} else if len(rep.Missed) < 5 {
			var top []string
			for _, h := range res.Hits {
				top = append(top, fmt.Sprintf("%s:%d-%d %.60q", h.Filename, h.StartLine, h.EndLine, h.Snippet))
			}
			rep.Missed = append(rep.Missed, fmt.Sprintf("%s (want %q): %s", id, want, strings.Join(top, "; ")))
		}
	}
	if rep.Facts > 0 {
		rep.Recall = float64(rep.Found) / float64(rep.Facts)
	}
	return nil
}

// holds reports whether the hit's lines of content hold want (its snippet may be cut short).
func holds(content string, h client.MemoryHit, want string) bool {
	lines := strings.Split(content, "\n")
	lo, hi := max(h.StartLine-1, 0), min(h.EndLine, len(lines))
	return lo < hi && strings.Contains(strings.Join(lines[lo:hi], "\n"), want)
}

// keptFiles reads the files where a fact may be kept: the core files and the notes under
// memory/ (daily notes and the archive).
func keptFiles(ctx context.Context, env Env) (map[string]string, error) {
	list, err := env.Client.ListFiles(ctx, env.Agent, "")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range list {
		if f.Filename != "MEMORY.md" && f.Filename != "PROFILE.md" && !strings.HasPrefix(f.Filename, "memory/") {
			continue
		}
		file, err := env.Client.ReadFile(ctx, env.Agent, f.Filename)
		if err != nil {
			return nil, err
		}
		out[f.Filename] = file.Content
	}
	return out, nil
}

// Table renders reports side by side, a row per month.
func Table(w io.Writer, reps ...Report) {
	fmt.Fprint(w, "| month |")
	for _, r := range reps {
		fmt.Fprintf(w, " %s core tokens (max) | %s out p50 | %s in p50 | %s archive KB |", r.Label, r.Label, r.Label, r.Label)
	}
	fmt.Fprint(w, "\n| --- |")
	for range reps {
		fmt.Fprint(w, " --- | --- | --- | --- |")
	}
	fmt.Fprintln(w)
	for i := 0; ; i++ {
		row := false
		var b strings.Builder
		for _, r := range reps {
			if i < len(r.Months) {
				m := r.Months[i]
				row = true
				fmt.Fprintf(&b, " %d (%d) | %d | %d | %.1f |", m.CoreEnd, m.CoreMax, m.OutMedian, m.InMedian, float64(m.ArchiveBytes)/1024)
			} else {
				b.WriteString(" | | | |")
			}
		}
		if !row {
			break
		}
		fmt.Fprintf(w, "| %d |%s\n", i+1, b.String())
	}
	for _, r := range reps {
		over, refused, failed := 0, 0, 0
		for _, m := range r.Months {
			over, refused, failed = over+m.OverBudgetDays, refused+m.Refused, failed+m.Failed
		}
		ctxDay := fmt.Sprintf("day %d", r.ContextDay)
		if r.ContextDay == 0 {
			ctxDay = "not within the run"
			if r.ProjectedContextDay > 0 {
				ctxDay += fmt.Sprintf(" (projected: day %d)", r.ProjectedContextDay)
			}
		}
		fmt.Fprintf(w, "\n%s: %d facts, recall@5 %.3f (%d found), %d lost, %d days over budget, %d refused, %d failed, %d dead letters; core files pass the context: %s; %s\n",
			r.Label, r.Facts, r.Recall, r.Found, r.Lost, over, refused, failed, r.DeadLetters, ctxDay, r.Duration.Round(time.Second))
	}
}
