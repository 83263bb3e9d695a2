package workspace

import "testing"

func TestIsSeed(t *testing.T) {
	for _, lang := range []string{"zh", "en"} {
		for _, name := range CoreFiles {
			if !IsSeed(name, DefaultContent(lang, name)+"\n") {
				t.Errorf("%s %s: the seeded text is not recognised", lang, name)
			}
			if IsSeed(name, DefaultContent(lang, name)+"\n- 用户喜欢 Go\n") {
				t.Errorf("%s %s: an edited file is taken for the seed", lang, name)
			}
		}
	}
	if IsSeed("memory/2026-01-01.md", "") {
		t.Error("a file without a seed is taken for one")
	}
}
