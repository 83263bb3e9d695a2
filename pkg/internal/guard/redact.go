package guard

import (
	"regexp"
	"strings"
)

// Redacted replaces a secret in text written to memory files.
const Redacted = "[REDACTED]"

// A pattern is a secret regexp with a cheap necessary condition. Redact runs on every
// transcript, summary and ledger reason, nearly all of which hold no secret, and running 15
// regexps over them was most of its cost; mayMatch looks for what a match cannot do without
// (a literal, a label before a colon ...) and returns false only when re provably cannot
// match s. When in doubt it returns true and the regexp decides.
type pattern struct {
	re       *regexp.Regexp
	mayMatch func(s string) bool
	// notSecret, when set, reports a matched value (the match after its label) that is
	// prose rather than a secret: it is left as it is.
	notSecret func(value string) bool
}

// secretPatterns match a whole secret, replaced by Redacted. Order matters: private key
// blocks and tokens with a known shape first, then generic assignments.
var secretPatterns = []pattern{
	// PEM private keys (RSA, EC, OPENSSH, PGP ...), whole block.
	{re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`), mayMatch: mayPEM},
	// OpenAI (sk-..., sk-proj-...), Anthropic (sk-ant-...), DeepSeek and other sk- keys.
	{re: regexp.MustCompile(`\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}`), mayMatch: maySK},
	// AWS access key ids.
	{re: regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`), mayMatch: mayAWS},
	// GitHub tokens.
	{re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`), mayMatch: mayGitHub},
	// Slack tokens and webhook URLs.
	{re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9\-]{10,}`), mayMatch: maySlack},
	{re: regexp.MustCompile(`https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+`), mayMatch: mayContain("https://hooks.slack.com/services/")},
	// Google API keys.
	{re: regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}`), mayMatch: mayContain("AIza")},
	// Stripe-style live/test secret keys.
	{re: regexp.MustCompile(`\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}`), mayMatch: mayStripe},
	// JSON Web Tokens.
	{re: regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`), mayMatch: mayJWT},
}

// keepPrefix patterns keep group 1 (the label) and replace the rest of the match.
var keepPrefix = []pattern{
	// Authorization: Bearer <token> / Basic <credentials>.
	// A plain word after "basic" or "bearer" is prose ("a basic understanding of it").
	{re: regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/\-]{12,}=*`), mayMatch: mayBearer, notSecret: isWord},
	// Credentials inside URLs: scheme://user:password@host.
	{re: regexp.MustCompile(`(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:)[^\s@/]+(@)`), mayMatch: mayURLPassword},
	// password=..., passcode: ..., api_key: "...", "secret": "...", client-secret = ... (the
	// value up to whitespace, or the quoted string).
	{re: regexp.MustCompile(`(?i)(\b(?:[a-z0-9]+[_\-])*(?:password|passwd|passphrase|passcode|pwd|secret|client[_\-]?secret|api[_\-]?key|apikey|access[_\-]?key(?:[_\-]?id)?|secret[_\-]?access[_\-]?key|private[_\-]?key|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token|token)\b["']?\s*[:=]\s*)(?:"[^"\n]*"|'[^'\n]*'|[^\s,;"']+)`), mayMatch: mayAssignment},
	// Natural language: "my password is hunter2", "the PIN was 4821", "passcode: 1234",
	// "API key is abc123" (a sentence's final period is not part of the secret).
	{re: regexp.MustCompile(`(?i)(\b(?:password|passwd|passphrase|passcode|pin(?:\s+code)?|api\s+key|access\s+token|secret\s+key|security\s+code|cvv|cvc)\s+(?:is|was|=|:)\s*:?\s+)[^\s,;]*[^\s,;.!?)]`), mayMatch: mayPhrase},
	// 密码：xxx, 口令是 xxx, 密钥=xxx, 令牌: xxx (full-width or ASCII separators).
	{re: regexp.MustCompile(`((?:密码|口令|密钥|秘钥|令牌|验证码|支付密码|登录密码)\s*(?:是|为|[:：=])\s*)[^\s，。,;；、）)]+`), mayMatch: mayChineseLabel},
}

// Redact masks secrets in s: API keys of known shapes (OpenAI/Anthropic sk-..., AWS, GitHub,
// Slack, Google, Stripe), JWTs, PEM private key blocks, bearer/basic credentials, passwords
// in URLs, and values of password/secret/token/api_key assignments and of Chinese labels
// such as 密码：or 口令是, natural-language passwords ("my password is ..."), and payment card
// numbers (13 to 19 digits, plain or grouped by spaces or dashes, Luhn-valid). Labels are kept so the text still reads ("password: [REDACTED]").
// Redact is idempotent. It returns s itself when there is nothing to mask, and allocates
// nothing when no pattern matches (a number failing the Luhn check included).
//
// A plain word after "basic" or "bearer" ("a basic understanding of it") is prose, not a
// credential, and is left alone.
//
// Each pattern runs on the output of the one before, as ReplaceAllString did; its
// necessary condition is checked on that same text, so skipping a pattern never changes the
// result.
func Redact(s string) string {
	s = redactCards(s)
	for _, p := range secretPatterns {
		if p.mayMatch(s) {
			s = replaceAll(p.re, s)
		}
	}
	for _, p := range keepPrefix {
		if p.mayMatch(s) {
			s = replaceKeepingLabel(p, s)
		}
	}
	return s
}

// replaceAll is re.ReplaceAllString(s, Redacted) (none of the patterns matches the empty
// string, so the matches are the same), returning s itself when nothing matches.
func replaceAll(re *regexp.Regexp, s string) string {
	locs := re.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, loc := range locs {
		b.WriteString(s[last:loc[0]])
		b.WriteString(Redacted)
		last = loc[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// replaceKeepingLabel replaces each match of re in s by its group 1 (the label), then
// Redacted (in the value's quotes if it was quoted), then group 2 if re has one; a match
// whose value is already Redacted is kept as it is, which makes Redact idempotent.
//
// The groups are the ones found in s. (The former implementation matched each match again
// alone to get them; a match starting with ſ or K, which (?i) letters match but \b counts
// as non-word, lost its leading \b alone: "_ſecret_token=abc" lost its ſ and "aſecret=abc"
// panicked with an index out of range, a crash any transcript could trigger.)
func replaceKeepingLabel(p pattern, s string) string {
	locs := p.re.FindAllStringSubmatchIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		m := s[loc[0]:loc[1]]
		tail := ""
		if len(loc) > 4 && loc[4] >= 0 {
			tail = s[loc[4]:loc[5]]
		}
		label := s[loc[2]:loc[3]]
		if p.notSecret != nil && p.notSecret(m[len(label):]) {
			continue
		}
		repl := keepLabel(m, label, tail)
		if repl == m {
			continue // already redacted: s[last:loc[1]] is copied as it is
		}
		if b.Len() == 0 {
			b.Grow(len(s) + len(Redacted))
		}
		b.WriteString(s[last:loc[0]])
		b.WriteString(repl)
		last = loc[1]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// isWord reports whether v, less a sentence's final periods, is a plain word: lower-case
// letters, possibly capitalised, or all capitals. Credentials (base64, random tokens, JWTs)
// mix cases or hold digits or symbols.
func isWord(v string) bool {
	v = strings.TrimRight(v, ".")
	if v == "" {
		return false
	}
	lower, upper := 0, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case 'a' <= c && c <= 'z':
			lower++
		case 'A' <= c && c <= 'Z':
			upper++
		default:
			return false
		}
	}
	return upper == 0 || lower == 0 || upper == 1 && 'A' <= v[0] && v[0] <= 'Z'
}

// keepLabel is the replacement of match m with the given label (group 1) and tail (group 2).
func keepLabel(m, label, tail string) string {
	rest := m[len(label):]
	if strings.HasPrefix(rest, Redacted) || strings.HasPrefix(rest, `"`+Redacted) || strings.HasPrefix(rest, `'`+Redacted) {
		return m
	}
	if q := rest[0]; q == '"' || q == '\'' {
		return label + string(q) + Redacted + string(q) + tail
	}
	return label + Redacted + tail
}

// redactCards masks payment card numbers: a candidate is masked only when its digits pass
// the Luhn check, so most order numbers and phone numbers are left alone.
func redactCards(s string) string {
	var b strings.Builder
	last := 0 // s[:last] is in b
	for i := 0; i < len(s); {
		end := -1
		if c := s[i]; '2' <= c && c <= '6' { // cheap first test, done again in cardCandidateAt
			end = cardCandidateAt(s, i)
		}
		if end < 0 {
			i++
			continue
		}
		if isCard(s[i:end]) {
			if b.Len() == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[last:i])
			b.WriteString(Redacted)
			last = end
		}
		i = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// cardCandidateAt returns the end of the card candidate that starts at s[i], or -1: 13 to
// 19 digits, plain or grouped by single spaces or dashes, starting with a digit card
// networks use (2 to 6). It is the regexp `\b[2-6](?:[ -]?\d){12,18}\b` (the former
// implementation, which the tests compare it with), without a regexp: at a given start
// each repetition of `[ -]?\d` can go only one way (a separator and a digit, or a digit),
// and the regexp takes as many as it can, up to 18, then gives them back one at a time
// until \b holds after the last digit, that is until the next character is not an ASCII
// word character. Redact's callers mostly pass text without a card, and their order and
// phone numbers come back untouched without a regexp run or an allocation.
func cardCandidateAt(s string, i int) int {
	if s[i] < '2' || s[i] > '6' || i > 0 && isWordByte(s[i-1]) {
		return -1
	}
	var ends [19]int // ends[k] is where k repetitions end
	k, j := 0, i+1
	for k < 18 {
		if j < len(s) && isDigit(s[j]) {
			j++
		} else if j+1 < len(s) && (s[j] == ' ' || s[j] == '-') && isDigit(s[j+1]) {
			j += 2
		} else {
			break
		}
		k++
		ends[k] = j
	}
	for ; k >= 12; k-- {
		if e := ends[k]; e == len(s) || !isWordByte(s[e]) {
			return e
		}
	}
	return -1
}

// isCard reports whether a card candidate's digits pass the Luhn check.
func isCard(m string) bool {
	digits := make([]byte, 0, 19)
	for i := 0; i < len(m); i++ {
		if isDigit(m[i]) {
			digits = append(digits, m[i])
		}
	}
	return len(digits) >= 13 && len(digits) <= 19 && luhn(digits)
}

// luhn is the card-number checksum (ISO/IEC 7812-1).
func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}
