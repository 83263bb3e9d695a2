package cronjob

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/matememory/matememory/pkg/internal/config"
)

// parser reads the standard 5-field expression (minute hour day-of-month month day-of-week)
// and the named schedules @yearly, @monthly, @weekly, @daily, @midnight and @hourly.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a parsed cron expression in a time zone.
//
// Daylight-saving time is handled the way Vixie cron does:
//   - an expression whose hour field is a wildcard ("*", "*/2", ...) runs in real time: every
//     matching minute that actually occurs, so a job every 15 minutes keeps its pace through
//     both transitions;
//   - an expression with fixed hours ("0 2 * * *") runs once per matching wall-clock time: a
//     time skipped by the spring-forward gap fires once at the end of the gap (02:30 in
//     America/New_York on the March change fires at 03:00 EDT, instead of not at all, as
//     robfig/cron alone would do), and a time repeated by the autumn fall-back fires only at
//     its first occurrence (instead of twice).
type Schedule struct {
	expr     string
	loc      *time.Location
	realTime bool
	// spec is evaluated in loc (real-time expressions) or in UTC standing in for the wall
	// clock of loc (fixed-hour expressions).
	spec *cron.SpecSchedule
}

// Parse validates a cron expression and an IANA time zone ("" and "Local" mean the process's
// zone). Errors are *InvalidError with a message naming the problem.
func Parse(expr, timezone string) (*Schedule, error) {
	expr = strings.TrimSpace(expr)
	loc, err := config.LoadLocation(timezone)
	if err != nil {
		return nil, invalidf("timezone %q is not an IANA time zone (e.g. Asia/Shanghai, Europe/Berlin, America/New_York, UTC)", timezone)
	}
	if expr == "" {
		return nil, invalidf(`cronExpression is required: 5 fields, minute hour day-of-month month day-of-week, e.g. "0 2 * * *" for 02:00 every day`)
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, invalidf("cronExpression %q carries a time zone; put the zone in the timezone field instead", expr)
	}
	if strings.HasPrefix(expr, "@every") {
		return nil, invalidf("cronExpression %q: @every intervals are not supported; use 5 fields, e.g. \"*/15 * * * *\" for every 15 minutes", expr)
	}
	if !strings.HasPrefix(expr, "@") {
		if n := len(strings.Fields(expr)); n != 5 {
			return nil, invalidf(`cronExpression %q has %d fields; expected 5: minute hour day-of-month month day-of-week, e.g. "0 2 * * *" (seconds are not supported)`, expr, n)
		}
	}
	parsed, err := parser.Parse(expr)
	if err != nil {
		return nil, invalidf(`cronExpression %q is invalid: %v; expected 5 fields: minute hour day-of-month month day-of-week, e.g. "0 2 * * *"`, expr, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, invalidf("cronExpression %q is not supported; use 5 fields, e.g. \"0 2 * * *\"", expr)
	}
	s := &Schedule{expr: expr, loc: loc, realTime: hourIsWildcard(expr)}
	cp := *spec
	if s.realTime {
		cp.Location = loc
	} else {
		cp.Location = time.UTC
	}
	s.spec = &cp
	// An expression such as "0 0 30 2 *" (February 30) parses but never fires.
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, invalidf("cronExpression %q never fires (no such date); check the day-of-month and month fields", expr)
	}
	return s, nil
}

// hourIsWildcard reports whether the hour field of expr contains "*" (descriptors have
// fixed hours except @hourly).
func hourIsWildcard(expr string) bool {
	if strings.HasPrefix(expr, "@") {
		return expr == "@hourly"
	}
	f := strings.Fields(expr)
	return len(f) == 5 && strings.Contains(f[1], "*")
}

// Expression is the expression as given (trimmed).
func (s *Schedule) Expression() string { return s.expr }

// Location is the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first slot strictly after t, in UTC, truncated to the second; the zero
// time if there is none within five years.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.realTime {
		n := s.spec.Next(t.In(s.loc))
		if n.IsZero() {
			return n
		}
		return n.UTC()
	}
	// Work on the wall clock: the fields of t in loc, read as if they were UTC, so that
	// robfig/cron never meets a transition; then map each wall slot back to an instant.
	lt := t.In(s.loc)
	w := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), lt.Nanosecond(), time.UTC)
	for i := 0; i < 4; i++ {
		nw := s.spec.Next(w)
		if nw.IsZero() {
			return nw
		}
		r := s.instant(nw)
		if r.After(t) {
			return r.UTC()
		}
		// The wall slot maps to an instant not after t: it was already passed (the second
		// occurrence of a repeated hour, or a gap slot collapsed onto the end of the gap).
		w = nw
	}
	return time.Time{}
}

// instant maps a wall-clock time (fields read from w, a UTC time) to the instant it names
// in loc: the first occurrence for a repeated time, the end of the gap for a skipped one.
func (s *Schedule) instant(w time.Time) time.Time {
	r := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, s.loc)
	back := r.In(s.loc)
	if sameWall(back, w) {
		// Go picks one of the two instants of a repeated wall time; make it the first.
		if earlier := r.Add(-time.Hour); sameWall(earlier.In(s.loc), w) {
			return earlier
		}
		for _, d := range []time.Duration{-30 * time.Minute, -2 * time.Hour} { // rare offsets (Lord Howe, Troll)
			if earlier := r.Add(d); sameWall(earlier.In(s.loc), w) {
				return earlier
			}
		}
		return r
	}
	// w does not exist in loc (spring-forward gap): fire at the transition, which is the
	// end of the zone period before the gap.
	start, end := back.ZoneBounds()
	if wallBefore(back, w) {
		return end
	}
	return start
}

func sameWall(t, w time.Time) bool {
	return t.Year() == w.Year() && t.Month() == w.Month() && t.Day() == w.Day() &&
		t.Hour() == w.Hour() && t.Minute() == w.Minute() && t.Second() == w.Second()
}

func wallBefore(t, w time.Time) bool {
	tw := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
	return tw.Before(w)
}

// String describes the schedule.
func (s *Schedule) String() string { return fmt.Sprintf("%s (%s)", s.expr, s.loc) }
