package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// Repeated query parameters. huma (like url.Values.Get) reads the first value of a query
// parameter given twice and drops the rest, so DELETE …?erase=true&confirm=1&confirm=2
// would pass the confirmation its caller never gave, and ?erase=true&erase=false would
// erase. Every operation's declared query parameters are therefore given once: the same
// value repeated is harmless and taken, different values are refused with 400 before the
// handler runs, on every route (typed and raw), not only the destructive ones.

// queryNames lists op's query parameters.
func queryNames(op *huma.Operation) []string {
	var names []string
	for _, p := range op.Parameters {
		if p != nil && p.In == "query" {
			names = append(names, p.Name)
		}
	}
	return names
}

// repeatedQuery reports the first of names that r's query gives more than one value.
func repeatedQuery(r *http.Request, names []string) error {
	if len(names) == 0 || r.URL.RawQuery == "" {
		return nil
	}
	q := r.URL.Query()
	for _, name := range names {
		vs := q[name]
		if len(vs) < 2 {
			continue
		}
		for _, v := range vs[1:] {
			if v != vs[0] {
				quoted := make([]string, len(vs))
				for i, v := range vs {
					quoted[i] = fmt.Sprintf("%q", v)
				}
				return BadRequest("query parameter %s is given %d times with different values (%s): give it once", name, len(vs), strings.Join(quoted, ", "))
			}
		}
	}
	return nil
}

// singleValued wraps h so that a request repeating one of names with different values is
// refused by refuse.
func singleValued(names []string, h http.Handler, refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	if len(names) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := repeatedQuery(r, names); err != nil {
			refuse(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
