package tokens

import (
	"math"
	"testing"
)

type accuracy struct{ mape, bias, worst float64 }

// measure compares count against exact over samples: mean absolute % error, mean signed %
// error (bias; positive = over-counts) and the worst absolute % error.
func measure(samples []string, exact, count func(string) int) accuracy {
	var a accuracy
	for _, s := range samples {
		e := float64(exact(s))
		d := (float64(count(s)) - e) / e * 100
		a.mape += math.Abs(d)
		a.bias += d
		a.worst = math.Max(a.worst, math.Abs(d))
	}
	n := float64(len(samples))
	a.mape /= n
	a.bias /= n
	return a
}

func TestEstimateBeatsSpecHeuristic(t *testing.T) {
	o, err := NewCounter().ByEncoding(O200K)
	if err != nil {
		t.Fatal(err)
	}
	samples := corpus(t)
	ours := measure(samples, o.Count, estimator{}.Count)
	spec := measure(samples, o.Count, Heuristic)
	t.Logf("against o200k_base on %d samples: estimate MAPE %.1f%% bias %+.1f%% worst %.1f%%; spec heuristic MAPE %.1f%% bias %+.1f%% worst %.1f%%",
		len(samples), ours.mape, ours.bias, ours.worst, spec.mape, spec.bias, spec.worst)
	if ours.mape >= spec.mape {
		t.Errorf("estimate MAPE %.1f%% does not beat the spec heuristic's %.1f%%", ours.mape, spec.mape)
	}
}
