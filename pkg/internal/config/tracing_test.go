package config_test

import (
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/config"
)

func TestTracingSettings(t *testing.T) {
	cfg, err := config.Load("", env())
	if err != nil {
		t.Fatal(err)
	}
	if tr := cfg.Mate.Tracing; tr.OTLPEndpoint != "" || tr.ServiceName != "" || tr.SampleRatio != 1 {
		t.Errorf("defaults: %+v, want no endpoint, no service name (per binary), sample ratio 1", tr)
	}
	cfg, err = config.Load("", env("MATE_TRACING_OTLP_ENDPOINT", "http://otel-collector:4318",
		"MATE_TRACING_SERVICE_NAME", "memory-api", "MATE_TRACING_SAMPLE_RATIO", "0.25"))
	if err != nil {
		t.Fatal(err)
	}
	if tr := cfg.Mate.Tracing; tr.OTLPEndpoint != "http://otel-collector:4318" || tr.ServiceName != "memory-api" || tr.SampleRatio != 0.25 {
		t.Errorf("overrides: %+v", tr)
	}
	for _, ok := range []string{"0", "1", "0.5"} {
		if _, err := config.Load("", env("MATE_TRACING_SAMPLE_RATIO", ok)); err != nil {
			t.Errorf("sample ratio %s refused: %v", ok, err)
		}
	}
	for _, ok := range []string{"https://otlp.example.com", "http://127.0.0.1:4318/v1/traces"} {
		if _, err := config.Load("", env("MATE_TRACING_OTLP_ENDPOINT", ok)); err != nil {
			t.Errorf("endpoint %s refused: %v", ok, err)
		}
	}

	cases := []struct {
		env  []string
		want []string
	}{
		{[]string{"MATE_TRACING_OTLP_ENDPOINT", "localhost:4318"}, []string{"mate.tracing.otlp-endpoint", "MATE_TRACING_OTLP_ENDPOINT", "http:// or https:// URL"}},
		{[]string{"MATE_TRACING_OTLP_ENDPOINT", "grpc://collector:4317"}, []string{"mate.tracing.otlp-endpoint", "OTLP/HTTP"}},
		{[]string{"MATE_TRACING_OTLP_ENDPOINT", "http://"}, []string{"mate.tracing.otlp-endpoint"}},
		{[]string{"MATE_TRACING_SAMPLE_RATIO", "1.5"}, []string{"mate.tracing.sample-ratio", "MATE_TRACING_SAMPLE_RATIO", "from 0"}},
		{[]string{"MATE_TRACING_SAMPLE_RATIO", "-0.1"}, []string{"mate.tracing.sample-ratio"}},
		{[]string{"MATE_TRACING_SAMPLE_RATIO", "NaN"}, []string{"mate.tracing.sample-ratio"}},
		{[]string{"MATE_TRACING_SAMPLE_RATIO", "half"}, []string{"MATE_TRACING_SAMPLE_RATIO", "not a number"}},
		{[]string{"MATE_TRACING_SERVICE_NAME", "matememory api"}, []string{"mate.tracing.service-name", "white space"}},
	}
	for _, c := range cases {
		_, err := config.Load("", env(c.env...))
		if err == nil {
			t.Errorf("%v: accepted", c.env)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", c.env, err, w)
			}
		}
	}
	keys := " " + strings.Join(config.Keys(), " ") + " "
	for _, k := range []string{"mate.tracing.otlp-endpoint", "mate.tracing.service-name", "mate.tracing.sample-ratio"} {
		if !strings.Contains(keys, " "+k+" ") {
			t.Errorf("Keys() lacks %s", k)
		}
	}
}
