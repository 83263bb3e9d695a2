package cronjob_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/cronjob"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// slots lists the slots of expr in tz from start (exclusive) until end (inclusive).
func slots(t *testing.T, expr, tz string, start, end time.Time) []time.Time {
	t.Helper()
	s, err := cronjob.Parse(expr, tz)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for cur := s.Next(start); !cur.IsZero() && !cur.After(end); cur = s.Next(cur) {
		out = append(out, cur)
		if len(out) > 10000 {
			t.Fatal("runaway")
		}
	}
	return out
}

func TestScheduleTimeZones(t *testing.T) {
	sh := mustLoc(t, "Asia/Shanghai")
	start := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	got := slots(t, "0 2 * * *", "Asia/Shanghai", start, start.Add(48*time.Hour))
	want := []time.Time{
		time.Date(2026, 4, 2, 2, 0, 0, 0, sh), // 2026-04-01 18:00Z: start is 08:00 in Shanghai
		time.Date(2026, 4, 3, 2, 0, 0, 0, sh),
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) || got[i].Location() != time.UTC {
			t.Fatalf("slot %d: got %v, want %v (in UTC)", i, got[i], want[i].UTC())
		}
	}
}

func TestScheduleDaylightSaving(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	berlin := mustLoc(t, "Europe/Berlin")
	cases := []struct {
		name, expr, tz string
		from, to       time.Time
		want           []time.Time
	}{
		{
			name: "spring-forward gap fires once at the end of the gap", expr: "30 2 * * *", tz: "America/New_York",
			from: time.Date(2026, 3, 7, 12, 0, 0, 0, ny), to: time.Date(2026, 3, 9, 12, 0, 0, 0, ny),
			want: []time.Time{
				time.Date(2026, 3, 8, 3, 0, 0, 0, ny), // 02:30 does not exist on March 8
				time.Date(2026, 3, 9, 2, 30, 0, 0, ny),
			},
		},
		{
			name: "the default 02:00 job on Berlin's spring-forward night", expr: "0 2 * * *", tz: "Europe/Berlin",
			from: time.Date(2026, 3, 28, 12, 0, 0, 0, berlin), to: time.Date(2026, 3, 30, 12, 0, 0, 0, berlin),
			want: []time.Time{
				time.Date(2026, 3, 29, 3, 0, 0, 0, berlin),
				time.Date(2026, 3, 30, 2, 0, 0, 0, berlin),
			},
		},
		{
			name: "fall-back repeated time fires once, at its first occurrence", expr: "30 1 * * *", tz: "America/New_York",
			from: time.Date(2026, 10, 31, 12, 0, 0, 0, ny), to: time.Date(2026, 11, 2, 12, 0, 0, 0, ny),
			want: []time.Time{
				time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), // 01:30 EDT
				time.Date(2026, 11, 2, 1, 30, 0, 0, ny),
			},
		},
		{
			name: "two gap slots collapse into one", expr: "0,30 2 * * *", tz: "America/New_York",
			from: time.Date(2026, 3, 8, 0, 0, 0, 0, ny), to: time.Date(2026, 3, 8, 12, 0, 0, 0, ny),
			want: []time.Time{time.Date(2026, 3, 8, 3, 0, 0, 0, ny)},
		},
		{
			name: "hourly job keeps real time through fall-back (25 slots)", expr: "0 * * * *", tz: "America/New_York",
			from: time.Date(2026, 11, 1, 0, 0, 0, 0, ny).Add(-time.Second), to: time.Date(2026, 11, 1, 23, 0, 0, 0, ny),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := slots(t, c.expr, c.tz, c.from, c.to)
			if c.want == nil {
				if len(got) != 25 {
					t.Fatalf("got %d slots, want 25: %v", len(got), got)
				}
				return
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range c.want {
				if !got[i].Equal(c.want[i]) {
					t.Fatalf("slot %d: got %v, want %v", i, got[i].In(mustLoc(t, c.tz)), c.want[i])
				}
			}
		})
	}
	// Every 15 minutes across the spring-forward day: 23 hours of real time, 92 slots.
	day := slots(t, "*/15 * * * *", "America/New_York", time.Date(2026, 3, 8, 0, 0, 0, 0, ny).Add(-time.Second),
		time.Date(2026, 3, 9, 0, 0, 0, 0, ny).Add(-time.Second))
	if len(day) != 92 {
		t.Fatalf("*/15 on the 23-hour day: %d slots, want 92", len(day))
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		expr, tz, wantIn string
	}{
		{"", "UTC", "required"},
		{"* * * *", "UTC", "4 fields"},
		{"0 0 2 * * *", "UTC", "6 fields"},
		{"61 * * * *", "UTC", "above maximum"},
		{"0 25 * * *", "UTC", "above maximum"},
		{"x * * * *", "UTC", "invalid"},
		{"0 0 30 2 *", "UTC", "never fires"},
		{"@every 5m", "UTC", "@every"},
		{"CRON_TZ=UTC 0 2 * * *", "UTC", "timezone field"},
		{"0 2 * * *", "Mars/Olympus_Mons", "not an IANA time zone"},
		{"0 2 * * *", "Asia/Shang hai", "not an IANA time zone"},
	}
	for _, c := range cases {
		_, err := cronjob.Parse(c.expr, c.tz)
		if !errors.Is(err, cronjob.ErrInvalid) || !strings.Contains(err.Error(), c.wantIn) {
			t.Errorf("Parse(%q, %q) = %v; want an invalid error containing %q", c.expr, c.tz, err, c.wantIn)
		}
	}
	for _, ok := range []string{"0 2 * * *", "*/5 9-17 * * 1-5", "0 0 1 jan *", "@daily", "@hourly"} {
		if _, err := cronjob.Parse(ok, "Europe/Berlin"); err != nil {
			t.Errorf("Parse(%q): %v", ok, err)
		}
	}
}
