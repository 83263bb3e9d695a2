package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/matememory/matememory/pkg/internal/httpapi"
)

//go:embed templates/*.html
var templateFS embed.FS

// pages holds one template set per page, each with the shared layout.
type pages struct {
	sets map[string]*template.Template
	md   goldmark.Markdown
}

var pageNames = []string{"signin", "error", "agents", "agent", "file", "conflict", "history", "blame", "rollback",
	"prompt", "search", "runs", "cron", "cronedit", "ops", "outcome", "fires", "confirm", "erase"}

func loadPages() (*pages, error) {
	p := &pages{sets: map[string]*template.Template{},
		// Raw HTML in a file is escaped (goldmark's default): a memory file cannot inject
		// script into the console.
		md: goldmark.New(goldmark.WithExtensions(extension.GFM))}
	funcs := template.FuncMap{
		"markdown": p.markdown,
		"kb": func(n int64) string {
			if n < 1024 {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f KB", float64(n)/1024)
		},
		"join": strings.Join,
		// pct is a budgeted file's use of its budget, in percent (0 without a budget).
		"pct": func(tokens, budget *int) int {
			if tokens == nil || budget == nil || *budget <= 0 {
				return 0
			}
			return *tokens * 100 / *budget
		},
		"deref": func(p *int) int {
			if p == nil {
				return 0
			}
			return *p
		},
		"add":  func(a, b int) int { return a + b },
		"list": func(s ...string) []string { return s },
		"dict": func(kv ...any) (map[string]any, error) {
			if len(kv)%2 != 0 {
				return nil, fmt.Errorf("dict needs key-value pairs")
			}
			m := make(map[string]any, len(kv)/2)
			for i := 0; i < len(kv); i += 2 {
				k, ok := kv[i].(string)
				if !ok {
					return nil, fmt.Errorf("dict key %v is not a string", kv[i])
				}
				m[k] = kv[i+1]
			}
			return m, nil
		},
	}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		p.sets[name] = t
	}
	return p, nil
}

func (p *pages) markdown(src string) template.HTML {
	var b bytes.Buffer
	if err := p.md.Convert([]byte(src), &b); err != nil {
		return template.HTML(template.HTMLEscapeString(src))
	}
	return template.HTML(b.String()) // goldmark escapes raw HTML (no WithUnsafe)
}

// view is what every page template gets.
type view struct {
	L        lang
	CSRF     string
	P        httpapi.Principal
	SignedIn bool
	Title    string
	// Nav marks the current section ("agents", "cron", "ops").
	Nav   string
	Path  string
	Flash string
	Err   string
	D     any
}

// render writes page name; a request from htmx (HX-Request) gets the "content" block only
// when fragment is set.
func (c *Console) render(q *req, status int, name, title, nav string, d any) error {
	v := view{L: q.lang, CSRF: q.csrf, P: q.p, SignedIn: true, Title: title, Nav: nav, Path: q.r.URL.RequestURI(),
		Flash: q.r.URL.Query().Get("flash"), D: d}
	return c.write(q.w, status, name, "layout.html", v)
}

// fragment writes the "content" block of page name alone (an htmx swap).
func (c *Console) fragment(q *req, name string, d any) error {
	v := view{L: q.lang, CSRF: q.csrf, P: q.p, SignedIn: true, D: d}
	return c.write(q.w, http.StatusOK, name, "content", v)
}

func (c *Console) write(w http.ResponseWriter, status int, name, tmpl string, v view) error {
	var b bytes.Buffer
	if err := c.pages.sets[name].ExecuteTemplate(&b, tmpl, v); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err := w.Write(b.Bytes())
	return err
}

func (c *Console) renderError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	l := c.lang(r)
	v := view{L: l, Title: l.T("err.title"), Err: msg, Path: r.URL.RequestURI()}
	if ss, ok := c.ss.read(r); ok {
		v.SignedIn, v.CSRF = true, c.ss.token(ss)
	}
	if err := c.write(w, status, "error", "layout.html", v); err != nil {
		http.Error(w, msg, status)
	}
}

// redirect answers a form post with 303 to url (and flash, a one-line message).
func redirect(q *req, url, flash string) error {
	if flash != "" {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += sep + "flash=" + template.URLQueryEscaper(flash)
	}
	http.Redirect(q.w, q.r, url, http.StatusSeeOther)
	return nil
}

// confirmData is a confirmation page for a destructive POST.
type confirmData struct {
	Title, Text, Action, Confirm, Cancel string
}
