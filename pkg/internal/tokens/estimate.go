package tokens

import (
	"math"
	"unicode"
	"unicode/utf8"
)

// The estimate imitates the pre-tokenizer of o200k_base in one pass over the text: it splits
// the text into the same kind of pieces (words split at camelCase, digit groups of up to
// three, punctuation runs, whitespace runs, CJK characters) and prices each kind of piece
// with a weight fitted by least squares against o200k_base on testdata/corpus.txt (mixed
// Chinese/English chat, code, numbers, logs). Rerun the fit with
//
//	go test ./pkg/internal/tokens -run TestCalibrate -calibrate -v
//
// and paste the printed weights here when the corpus changes.

// feature indexes.
const (
	fWord        = iota // an ASCII letter word (split at lower→upper)
	fWordLong           // letters beyond the 6th of a word
	fDigits             // groups of up to three digits
	fSpace              // whitespace pieces that are tokens of their own
	fHan                // CJK ideographs
	fCJKPunct           // full-width and CJK punctuation
	fPunct              // ASCII punctuation runs that are not a word's prefix
	fPunctLong          // characters beyond the first of such a run
	fOtherLetter        // letters of other scripts (Latin-1, Cyrillic, Greek, ...)
	fKanaHangul         // kana and hangul
	fSymbol             // emoji and other symbols
	numFeatures
)

// weights are the fitted price of each piece kind, in tokens (see TestCalibrate).
var weights = [numFeatures]float64{
	fWord:        0.992,
	fWordLong:    0.126,
	fDigits:      0.980,
	fSpace:       1.173,
	fHan:         0.802,
	fCJKPunct:    0.801,
	fPunct:       0.939,
	fPunctLong:   0.301,
	fOtherLetter: 0.289,
	fKanaHangul:  0.524,
	fSymbol:      1.718,
}

type estimator struct{}

func (estimator) Name() string { return Estimate }
func (estimator) Exact() bool  { return false }

// Count implements Tokenizer.
func (estimator) Count(text string) int {
	if text == "" {
		return 0
	}
	f := features(text)
	var sum float64
	for i, v := range f {
		sum += weights[i] * v
	}
	n := int(math.Round(sum))
	if n < 1 {
		n = 1
	}
	return n
}

type class uint8

const (
	cLower class = iota
	cUpper
	cDigit
	cSpace
	cNewline
	cPunct
	cHan
	cCJKPunct
	cOtherLetter
	cKanaHangul
	cSymbol
	cEnd
)

func classify(r rune) class {
	if r < utf8.RuneSelf {
		switch {
		case r >= 'a' && r <= 'z':
			return cLower
		case r >= 'A' && r <= 'Z':
			return cUpper
		case r >= '0' && r <= '9':
			return cDigit
		case r == '\n' || r == '\r':
			return cNewline
		case r == ' ' || r == '\t' || r == '\v' || r == '\f':
			return cSpace
		}
		return cPunct
	}
	switch {
	case unicode.Is(unicode.Han, r):
		return cHan
	case r >= 0x3000 && r <= 0x303F, r >= 0xFF00 && r <= 0xFFEF, r >= 0x2010 && r <= 0x206F:
		// CJK symbols and punctuation, full-width forms, general punctuation (“”‘’—…).
		return cCJKPunct
	case unicode.In(r, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
		return cKanaHangul
	case unicode.IsLetter(r) || unicode.IsMark(r):
		return cOtherLetter
	case unicode.IsDigit(r):
		return cDigit
	case unicode.IsSpace(r):
		return cSpace
	}
	return cSymbol
}

func isLetterClass(c class) bool {
	return c == cLower || c == cUpper || c == cHan || c == cOtherLetter || c == cKanaHangul
}

// features counts the piece kinds of text.
func features(s string) [numFeatures]float64 {
	var f [numFeatures]float64
	// Decode once into classes; texts are message-sized.
	cls := make([]class, 0, len(s))
	for _, r := range s {
		cls = append(cls, classify(r))
	}
	afterPunct := false
	for i := 0; i < len(cls); {
		switch c := cls[i]; c {
		case cLower, cUpper:
			i = countWords(cls, i, &f)
			afterPunct = false
		case cDigit:
			i = countDigits(cls, i, &f)
			afterPunct = false
		case cSpace, cNewline:
			i = countSpace(cls, i, afterPunct, &f)
			afterPunct = false
		case cPunct:
			i, afterPunct = countPunct(cls, i, &f)
		default:
			f[singleFeature(c)]++
			i++
			afterPunct = false
		}
	}
	return f
}

// classAt is the class at i, cEnd past the end.
func classAt(cls []class, i int) class {
	if i < len(cls) {
		return cls[i]
	}
	return cEnd
}

// countWords counts the run of letters from i as words (a new word starts at an upper-case
// letter that follows a lower-case one) and returns where the run ends.
func countWords(cls []class, i int, f *[numFeatures]float64) int {
	j := i
	wordLen := 0
	for j < len(cls) && (cls[j] == cLower || cls[j] == cUpper) {
		if wordLen > 0 && cls[j] == cUpper && cls[j-1] == cLower {
			f[fWord]++
			f[fWordLong] += math.Max(0, float64(wordLen-6))
			wordLen = 0
		}
		wordLen++
		j++
	}
	f[fWord]++
	f[fWordLong] += math.Max(0, float64(wordLen-6))
	return j
}

// countDigits counts the run of digits from i, a piece per three, and returns its end.
func countDigits(cls []class, i int, f *[numFeatures]float64) int {
	j := i
	for j < len(cls) && cls[j] == cDigit {
		j++
	}
	f[fDigits] += float64((j - i + 2) / 3)
	return j
}

// countSpace counts the run of white space from i: the newlines (unless they follow
// punctuation), the indentation, a lone space before a digit or at the end; it returns the
// run's end.
func countSpace(cls []class, i int, afterPunct bool, f *[numFeatures]float64) int {
	j := i
	lastNL := -1
	for j < len(cls) && (cls[j] == cSpace || cls[j] == cNewline) {
		if cls[j] == cNewline {
			lastNL = j
		}
		j++
	}
	if lastNL >= 0 && !afterPunct {
		f[fSpace]++ // the newline run
	}
	tail := j - i
	if lastNL >= 0 {
		tail = j - lastNL - 1
	}
	n := classAt(cls, j)
	switch {
	case tail >= 2:
		f[fSpace]++ // indentation: one piece, its last char joins the next word
	case tail == 1 && !isLetterClass(n) && n != cPunct && n != cCJKPunct:
		f[fSpace]++ // a space before a digit or at the end stands alone
	}
	return j
}

// countPunct counts the run of punctuation from i and returns its end, and whether it
// counted as punctuation (one character before a letter joins the word instead: ".Wait",
// "_id").
func countPunct(cls []class, i int, f *[numFeatures]float64) (end int, counted bool) {
	j := i
	for j < len(cls) && cls[j] == cPunct {
		j++
	}
	if j-i == 1 && isLetterClass(classAt(cls, j)) {
		return j, false
	}
	f[fPunct]++
	f[fPunctLong] += float64(j - i - 1)
	return j, true
}

// singleFeature is the feature a character of class c counts for on its own.
func singleFeature(c class) int {
	switch c {
	case cHan:
		return fHan
	case cCJKPunct:
		return fCJKPunct
	case cOtherLetter:
		return fOtherLetter
	case cKanaHangul:
		return fKanaHangul
	default:
		return fSymbol
	}
}

// Heuristic is the spec's TokenEstimator: CJK characters 1 token each, ASCII 4 characters a
// token, anything else 1.5 characters a token. It is kept for comparison only.
func Heuristic(text string) int {
	var cjk, ascii, other float64
	for _, r := range text {
		switch {
		case r < utf8.RuneSelf:
			ascii++
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul),
			r >= 0x3000 && r <= 0x303F, r >= 0xFF00 && r <= 0xFFEF:
			cjk++
		default:
			other++
		}
	}
	return int(math.Ceil(cjk + ascii/4 + other/1.5))
}
