package console

import (
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// diffRow is one line of a side-by-side diff: Kind is "same", "del" (left only), "add"
// (right only) or "mod" (changed: both sides).
type diffRow struct {
	Kind       string
	LeftNo     int
	Left       string
	RightNo    int
	Right      string
	HasL, HasR bool
}

// sideBySide diffs a and b by lines (Myers, go-diff's line mode) and pairs deletions with
// the insertions that follow them, so a changed line sits beside its new text.
func sideBySide(a, b string) (rows []diffRow, changed bool) {
	dmp := diffmatchpatch.New()
	ca, cb, lines := dmp.DiffLinesToChars(a, b)
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), lines)
	ln, rn := 0, 0
	var dels, adds []string
	flush := func() {
		n := max(len(dels), len(adds))
		for i := 0; i < n; i++ {
			row := diffRow{Kind: "mod"}
			if i < len(dels) {
				ln++
				row.LeftNo, row.Left, row.HasL = ln, dels[i], true
			} else {
				row.Kind = "add"
			}
			if i < len(adds) {
				rn++
				row.RightNo, row.Right, row.HasR = rn, adds[i], true
			} else {
				row.Kind = "del"
			}
			rows = append(rows, row)
		}
		dels, adds = dels[:0], adds[:0]
	}
	for _, d := range diffs {
		ls := splitLines(d.Text)
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			dels = append(dels, ls...)
			changed = true
		case diffmatchpatch.DiffInsert:
			adds = append(adds, ls...)
			changed = true
		default:
			flush()
			for _, l := range ls {
				ln++
				rn++
				rows = append(rows, diffRow{Kind: "same", LeftNo: ln, Left: l, RightNo: rn, Right: l, HasL: true, HasR: true})
			}
		}
	}
	flush()
	return rows, changed
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
