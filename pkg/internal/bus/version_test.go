package bus

import (
	"strings"
	"testing"
)

func TestCheckServerVersion(t *testing.T) {
	for _, c := range []struct {
		v   string
		err string
	}{
		{"2.10.0", ""}, {"2.15.2", ""}, {"v2.11.4", ""}, {"3.0.0", ""}, {"2.12.0-beta.1", ""},
		{"2.9.25", "nats-server 2.9.25 is too old: MateMemory needs 2.10.0 or later"},
		{"1.4.1", "too old"},
		{"", "not a version"}, {"banana", "not a version"},
	} {
		err := CheckServerVersion(c.v)
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %v, want %q", c.v, err, c.err)
		}
	}
}
