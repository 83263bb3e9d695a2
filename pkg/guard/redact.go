package guard

import (
	"regexp"
	"strings"
)

// Redacted replaces a secret in text written to memory files.
const Redacted = "[REDACTED]"

// secretPatterns match a whole secret, replaced by Redacted. Order matters: private key
// blocks and tokens with a known shape first, then generic assignments.
var secretPatterns = []*regexp.Regexp{
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

// keepPrefix patterns keep group 1 (the label) and replace the rest of the match.
var keepPrefix = []*regexp.Regexp{
	// Authorization: Bearer <token> / Basic <credentials>.
	regexp.MustCompile(`(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/\-]{12,}=*`),
	// Credentials inside URLs: scheme://user:password@host.
	regexp.MustCompile(`(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:)[^\s@/]+(@)`),
	// password=..., api_key: "...", "secret": "...", client-secret = ... (the value up to
	// whitespace, or the quoted string).
	regexp.MustCompile(`(?i)(\b(?:[a-z0-9]+[_\-])*(?:password|passwd|passphrase|pwd|secret|client[_\-]?secret|api[_\-]?key|apikey|access[_\-]?key(?:[_\-]?id)?|secret[_\-]?access[_\-]?key|private[_\-]?key|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token|token)\b["']?\s*[:=]\s*)(?:"[^"\n]*"|'[^'\n]*'|[^\s,;"']+)`),
	// 密码：xxx, 口令是 xxx, 密钥=xxx, 令牌: xxx (full-width or ASCII separators).
	regexp.MustCompile(`((?:密码|口令|密钥|秘钥|令牌|验证码|支付密码|登录密码)\s*(?:是|为|[:：=])\s*)[^\s，。,;；、）)]+`),
}

// Redact masks secrets in s: API keys of known shapes (OpenAI/Anthropic sk-..., AWS, GitHub,
// Slack, Google, Stripe), JWTs, PEM private key blocks, bearer/basic credentials, passwords
// in URLs, and values of password/secret/token/api_key assignments and of Chinese labels
// such as 密码：or 口令是. Labels are kept so the text still reads ("password: [REDACTED]").
// Redact is idempotent.
func Redact(s string) string {
	for _, re := range secretPatterns {
		s = re.ReplaceAllString(s, Redacted)
	}
	for _, re := range keepPrefix {
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
