package bus

import (
	"fmt"
	"strconv"
	"strings"
)

// MinServerVersion is the oldest nats-server MateMemory runs on: its consumers filter on
// several subjects (FilterSubjects, 2.10) and its streams allow direct gets (2.9).
const MinServerVersion = "2.10.0"

// CheckServerVersion refuses a server older than MinServerVersion, naming both versions.
func CheckServerVersion(version string) error {
	got, ok := parseVersion(version)
	if !ok {
		return fmt.Errorf("nats-server reports version %q, which is not a version; MateMemory needs %s or later", version, MinServerVersion)
	}
	min, _ := parseVersion(MinServerVersion)
	for i := range got {
		if got[i] != min[i] {
			if got[i] < min[i] {
				return fmt.Errorf("nats-server %s is too old: MateMemory needs %s or later (multi-subject consumers); upgrade the server", version, MinServerVersion)
			}
			return nil
		}
	}
	return nil
}

func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	v, _, _ = strings.Cut(v, "-") // pre-release or build suffix
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
