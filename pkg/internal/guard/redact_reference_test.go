package guard

import (
	"regexp"
	"strings"
)

// referenceRedact is Redact as it was before the fast path (commit b7e7a19), kept verbatim
// (names prefixed with reference) so the tests can prove the new implementation gives the
// same output for every input, and the benchmark can measure against it.
func referenceRedact(s string) string {
	s = referenceRedactCards(s)
	for _, re := range referenceSecretPatterns {
		s = re.ReplaceAllString(s, Redacted)
	}
	for _, re := range referenceKeepPrefix {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			rest := m[len(sub[1]):]
			if strings.HasPrefix(rest, Redacted) || strings.HasPrefix(rest, `"`+Redacted) || strings.HasPrefix(rest, `'`+Redacted) {
				return m
			}
			tail := ""
			if len(sub) > 2 {
				tail = sub[2]
			}
			if q := rest[0]; q == '"' || q == '\'' {
				return sub[1] + string(q) + Redacted + string(q) + tail
			}
			return sub[1] + Redacted + tail
		})
	}
	return s
}

// fixedKeepPrefix is referenceKeepPrefix with passcode among the assignment keywords (the
// former patterns left "passcode: 1234" unmasked).
var fixedKeepPrefix = func() []*regexp.Regexp {
	out := append([]*regexp.Regexp(nil), referenceKeepPrefix...)
	out[2] = regexp.MustCompile(strings.Replace(out[2].String(), "(?:password|passwd|passphrase|", "(?:password|passwd|passphrase|passcode|", 1))
	return out
}()

// referencePlainWord is a plain word (lower case, capitalised or all capitals) with a
// sentence's final periods.
var referencePlainWord = regexp.MustCompile(`^(?:[a-z]+|[A-Z][a-z]+|[A-Z]+)\.*$`)

// fixedReferenceRedact is referenceRedact with its three defects fixed: the label of a
// match is the group found in the text, not in the match matched again alone (which lost a
// leading \b for a match starting with ſ or K, and then the label or the whole match); a
// plain word after "bearer" or "basic" is left alone ("a basic understanding of it"); and
// passcode is an assignment keyword (fixedKeepPrefix).
func fixedReferenceRedact(s string) string {
	s = referenceRedactCards(s)
	for _, re := range referenceSecretPatterns {
		s = re.ReplaceAllString(s, Redacted)
	}
	for i, re := range fixedKeepPrefix {
		var b strings.Builder
		last := 0
		for _, loc := range re.FindAllStringSubmatchIndex(s, -1) {
			m, label := s[loc[0]:loc[1]], s[loc[2]:loc[3]]
			rest := m[len(label):]
			if i == 0 && referencePlainWord.MatchString(rest) {
				continue // a plain word after bearer/basic is prose
			}
			if strings.HasPrefix(rest, Redacted) || strings.HasPrefix(rest, `"`+Redacted) || strings.HasPrefix(rest, `'`+Redacted) {
				continue
			}
			tail := ""
			if len(loc) > 4 && loc[4] >= 0 {
				tail = s[loc[4]:loc[5]]
			}
			b.WriteString(s[last:loc[0]])
			if q := rest[0]; q == '"' || q == '\'' {
				b.WriteString(label + string(q) + Redacted + string(q) + tail)
			} else {
				b.WriteString(label + Redacted + tail)
			}
			last = loc[1]
		}
		b.WriteString(s[last:])
		s = b.String()
	}
	return s
}

var referenceSecretPatterns = []*regexp.Regexp{
	// PEM private keys (RSA, EC, OPENSSH, PGP ...), whole block.
	regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`),
	// OpenAI (sk-..., sk-proj-...), Anthropic (sk-ant-...), DeepSeek and other sk- keys.
	regexp.MustCompile(`\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}`),
	// AWS access key ids.
	regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`),
	// GitHub tokens.
	regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`),
	// Slack tokens and webhook URLs.
	regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9\-]{10,}`),
	regexp.MustCompile(`https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+`),
	// Google API keys.
	regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}`),
	// Stripe-style live/test secret keys.
	regexp.MustCompile(`\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}`),
	// JSON Web Tokens.
	regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`),
}

var referenceKeepPrefix = []*regexp.Regexp{
	// Authorization: Bearer <token> / Basic <credentials>.
	regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/\-]{12,}=*`),
	// Credentials inside URLs: scheme://user:password@host.
	regexp.MustCompile(`(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:)[^\s@/]+(@)`),
	// password=..., api_key: "...", "secret": "...", client-secret = ... (the value up to
	// whitespace, or the quoted string).
	regexp.MustCompile(`(?i)(\b(?:[a-z0-9]+[_\-])*(?:password|passwd|passphrase|pwd|secret|client[_\-]?secret|api[_\-]?key|apikey|access[_\-]?key(?:[_\-]?id)?|secret[_\-]?access[_\-]?key|private[_\-]?key|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token|token)\b["']?\s*[:=]\s*)(?:"[^"\n]*"|'[^'\n]*'|[^\s,;"']+)`),
	// Natural language: "my password is hunter2", "the PIN was 4821", "passcode: 1234",
	// "API key is abc123" (a sentence's final period is not part of the secret).
	regexp.MustCompile(`(?i)(\b(?:password|passwd|passphrase|passcode|pin(?:\s+code)?|api\s+key|access\s+token|secret\s+key|security\s+code|cvv|cvc)\s+(?:is|was|=|:)\s*:?\s+)[^\s,;]*[^\s,;.!?)]`),
	// 密码：xxx, 口令是 xxx, 密钥=xxx, 令牌: xxx (full-width or ASCII separators).
	regexp.MustCompile(`((?:密码|口令|密钥|秘钥|令牌|验证码|支付密码|登录密码)\s*(?:是|为|[:：=])\s*)[^\s，。,;；、）)]+`),
}

var referenceCardCandidate = regexp.MustCompile(`\b[2-6](?:[ -]?\d){12,18}\b`)

func referenceRedactCards(s string) string {
	return referenceCardCandidate.ReplaceAllStringFunc(s, func(m string) string {
		digits := make([]byte, 0, len(m))
		for i := 0; i < len(m); i++ {
			if m[i] >= '0' && m[i] <= '9' {
				digits = append(digits, m[i])
			}
		}
		if len(digits) < 13 || len(digits) > 19 || !referenceLuhn(digits) {
			return m
		}
		return Redacted
	})
}

func referenceLuhn(digits []byte) bool {
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
