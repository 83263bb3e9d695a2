package apitest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
)

// recorder collects the validator's complaints instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

type thing struct {
	Name  string `json:"name"`
	extra bool
}

// MarshalJSON adds a field the schema does not have when extra is set.
func (t thing) MarshalJSON() ([]byte, error) {
	if t.extra {
		return []byte(fmt.Sprintf(`{"name":%q,"secret":"x"}`, t.Name)), nil
	}
	return []byte(fmt.Sprintf(`{"name":%q}`, t.Name)), nil
}

// TestValidatorCatchesDrift: a documented answer passes; an undocumented field, status or
// wrong type fails.
func TestValidatorCatchesDrift(t *testing.T) {
	s := httpapi.New(httpapi.NewAuthenticator(nil), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	type in struct {
		httpapi.AgentPath
		Mode string `query:"mode"`
	}
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}/thing", OperationID: "thing",
		Summary: "A thing", Tags: []string{"Agents"}, Errors: []int{404}},
		func(_ context.Context, in *in) (*httpapi.Response[thing], error) {
			switch in.Mode {
			case "extra":
				return httpapi.OK(thing{Name: "a", extra: true}), nil
			case "teapot":
				return httpapi.Answer(http.StatusTeapot, thing{Name: "a"}), nil
			case "missing":
				return nil, httpapi.Errorf(http.StatusNotFound, "no thing")
			case "conflict":
				return nil, httpapi.Errorf(http.StatusConflict, "undocumented")
			}
			return httpapi.OK(thing{Name: "a"}), nil
		})
	ts := httptest.NewServer(s)
	defer ts.Close()
	for _, c := range []struct {
		query, complaint string
	}{
		{"", ""},
		{"?mode=missing", ""},
		{"?mode=extra", "secret"},
		{"?mode=teapot", "status"},
		{"?mode=conflict", "status"},
	} {
		r := &recorder{TB: t}
		v := apitest.New(r, s, nil)
		resp, err := v.Client().Get(ts.URL + "/api/v1/agents/1/thing" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := strings.Join(r.errs, "\n")
		if c.complaint == "" && got != "" || c.complaint != "" && !strings.Contains(got, c.complaint) {
			t.Errorf("%q: validator said %q, want a complaint about %q", c.query, got, c.complaint)
		}
	}
}

// TestValidatorCatchesLaxRequests: a request the server accepts but the document refuses
// (a field the document calls required) fails, since a generated client could not send it.
func TestValidatorCatchesLaxRequests(t *testing.T) {
	s := httpapi.New(httpapi.NewAuthenticator(nil), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	type in struct {
		Body struct {
			Name *string `json:"name"`
		}
	}
	// A lax operation: its body is not validated against the schema (SkipValidateBody).
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/things", OperationID: "createThing",
		Summary: "Create a thing", Tags: []string{"Agents"}, SkipValidateBody: true},
		func(_ context.Context, in *in) (*httpapi.Response[thing], error) {
			return httpapi.OK(thing{Name: "a"}), nil
		})
	ts := httptest.NewServer(s)
	defer ts.Close()
	for body, complaint := range map[string]string{`{"name":"a"}`: "", `{}`: "name"} {
		r := &recorder{TB: t}
		resp, err := apitest.New(r, s, nil).Client().Post(ts.URL+"/api/v1/things", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := strings.Join(r.errs, "\n")
		if complaint == "" && got != "" || complaint != "" && !strings.Contains(got, complaint) {
			t.Errorf("%s: validator said %q, want a complaint about %q", body, got, complaint)
		}
	}
}
